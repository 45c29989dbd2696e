"""Django admin for support staff: every record readable; nothing written
around the services. Runtime model edits come with the console's forms."""

from django.contrib import admin

from .models import ApiToken, AuditEvent, CatalogVersion, SettingsVersion, StoredModel


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(StoredModel)
class StoredModelAdmin(ReadOnlyAdmin):
    list_display = ("name", "updated_at", "updated_by", "created_by")
    search_fields = ("name",)


@admin.register(SettingsVersion)
class SettingsVersionAdmin(ReadOnlyAdmin):
    list_display = ("number", "author", "created_at", "comment")


@admin.register(CatalogVersion)
class CatalogVersionAdmin(ReadOnlyAdmin):
    list_display = ("version", "digest", "created_at", "created_by", "reason", "settings_version")
    exclude = ("document",)


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("at", "actor", "action", "object_type", "object_id", "request_id")
    list_filter = ("action", "object_type")
    search_fields = ("actor", "object_id", "request_id")


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    list_display = ("user", "name", "prefix", "created_at", "last_used_at", "revoked_at")
    exclude = ("key_hash",)
