"""The console's pages. Model names may contain '/' and ':'; ``/-/`` ends
a name (no name has a '-' segment), so the operation routes come first."""

from django.contrib.auth import views as auth_views
from django.urls import path, re_path
from django.views.generic import RedirectView

from .views import models

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
]
