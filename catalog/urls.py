"""The console's pages. Model names may contain '/' and ':'; ``/-/`` ends
a name (no name has a '-' segment), so the operation routes come first."""

from django.contrib.auth import views as auth_views
from django.urls import path, re_path
from django.views.generic import RedirectView

from .views import gateways, models, pages
from .views import settings as settings_views

NAME = r"(?P<name>[A-Za-z0-9._:][A-Za-z0-9._:/-]*?)"

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(template_name="catalog/login.html", redirect_authenticated_user=True),
         name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", RedirectView.as_view(pattern_name="models"), name="home"),
    path("models/", models.models_list, name="models"),
    path("models/add/", models.model_add, name="model-add"),
    path("models/add/check", models.model_add_check, name="model-add-check"),
    re_path(rf"^models/{NAME}/-/remove$", models.model_remove, name="model-remove"),
    re_path(rf"^models/{NAME}/-/(?P<op>[a-z]+)$", models.model_operation, name="model-operation"),
    re_path(rf"^models/{NAME}$", models.model_detail, name="model"),
    # Settings, gateways and the reading screens (SPEC §7).
    path("settings/", settings_views.settings_page, name="settings"),
    path("settings/preview", settings_views.settings_preview, name="settings-preview"),
    path("settings/save", settings_views.settings_save, name="settings-save"),
    path("settings/key", settings_views.settings_key, name="settings-key"),
    path("settings/history", settings_views.settings_history, name="settings-history"),
    path("settings/versions/<int:number>", settings_views.settings_version, name="settings-version"),
    path("settings/rollback/<int:number>", settings_views.settings_rollback, name="settings-rollback"),
    path("gateways/", gateways.gateways_page, name="gateways"),
    path("gateways/add", gateways.gateway_add, name="gateway-add"),
    path("gateways/<str:name>/push", gateways.gateway_push, name="gateway-push"),
    path("gateways/<str:name>/remove", gateways.gateway_remove, name="gateway-remove"),
    path("sources/", pages.sources_page, name="sources"),
    path("catalog/versions/", pages.versions_page, name="catalog-versions"),
    path("catalog/versions/<int:number>", pages.version_page, name="catalog-version"),
    path("federation/", pages.federation_page, name="federation"),
    path("federation/fetch", pages.federation_fetch, name="federation-fetch"),
    path("audit/", pages.audit_page, name="audit"),
    path("tokens/", pages.tokens_page, name="tokens"),
    path("tokens/create", pages.token_create, name="token-create"),
    path("tokens/<int:token_id>/revoke", pages.token_revoke, name="token-revoke"),
]
