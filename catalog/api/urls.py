"""``/api/v1/...``. Model names may contain '/' and ':', so they are matched
with regular expressions; ``/-/`` ends a name (no name has a '-' segment)."""

from django.urls import path, re_path

from . import federation_views, gateway_views, settings_views, views

NAME = r"(?P<name>[A-Za-z0-9._:][A-Za-z0-9._:/-]*?)"

urlpatterns = [
    path("v1/health", views.HealthView.as_view(), name="api-health"),
    path("v1/models", views.ModelsView.as_view(), name="api-models"),
    re_path(rf"^v1/models/{NAME}/-/resources$", views.ModelResourcesView.as_view(), name="api-model-resources"),
    re_path(rf"^v1/models/{NAME}$", views.ModelDetailView.as_view(), name="api-model"),
    path("v1/skipped", views.SkippedView.as_view(), name="api-skipped"),
    path("v1/sources", views.SourcesView.as_view(), name="api-sources"),
    path("v1/catalog", views.CatalogView.as_view(), name="api-catalog"),
    path("v1/catalog/versions", views.CatalogVersionsView.as_view(), name="api-catalog-versions"),
    path("v1/catalog/versions/<int:number>", views.CatalogVersionDetailView.as_view(), name="api-catalog-version"),
    path("v1/audit", views.AuditView.as_view(), name="api-audit"),
    path("v1/settings", settings_views.SettingsView.as_view(), name="api-settings"),
    path("v1/settings/preview", settings_views.SettingsPreviewView.as_view(), name="api-settings-preview"),
    re_path(r"^v1/settings/keys/(?P<key>[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)$", settings_views.SettingsKeyView.as_view(),
            name="api-settings-key"),
    path("v1/settings/versions", settings_views.SettingsVersionsView.as_view(), name="api-settings-versions"),
    path("v1/settings/versions/<int:number>", settings_views.SettingsVersionDetailView.as_view(),
         name="api-settings-version"),
    path("v1/settings/rollback", settings_views.SettingsRollbackView.as_view(), name="api-settings-rollback"),
    path("v1/gateways", gateway_views.GatewaysView.as_view(), name="api-gateways"),
    path("v1/gateways/<str:name>", gateway_views.GatewayDetailView.as_view(), name="api-gateway"),
    path("v1/gateways/<str:name>/push", gateway_views.GatewayPushView.as_view(), name="api-gateway-push"),
    path("v1/federation/offer", federation_views.OfferView.as_view(), name="api-federation-offer"),
    path("v1/federation/peers", federation_views.PeersView.as_view(), name="api-federation-peers"),
    path("v1/federation/peers/fetch", federation_views.PeersFetchView.as_view(), name="api-federation-fetch"),
    re_path(r"^(?P<rest>(?s:.*))$", views.NotFoundView.as_view(), name="api-not-found"),
]
