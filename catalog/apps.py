from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "catalog"
    verbose_name = "llmgw catalog"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from .api import schema  # noqa: F401  registers the schema extension
