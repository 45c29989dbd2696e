"""Django admin for support staff: every record readable; nothing written
around the services.

A runtime model is edited here as its JSON definition, and saved by the
same service the console and the API use (``add_model``): the builder's
problems come back as errors on the form and nothing is written; a removal
goes through ``remove_model``, so one that would break the catalog is
refused and the row stays. Versions and the audit log are history: read-only.
Gateway tokens are secrets and never shown, not even encrypted.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import Subquery
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.html import format_html

from .builder import CatalogError
from .builder.settings import mask_secrets
from .forms_settings import yaml_text
from .models import ApiToken, AuditEvent, CatalogVersion, Gateway, PeerOffer, SettingsVersion, StoredModel
from .selectors import gateway_state
from .services import models as model_services
from .services import users as user_services
from .services.errors import NotFound, Refusal


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


def _problem_line(model: str, subject: str | None, path: str, message: str) -> str:
    where = [f"model {model!r}"] if model and subject and model != subject and not model.startswith("#") else []
    if path and path not in message:
        where.append(path)
    return f"{': '.join(where)}: {message}" if where else message


class StoredModelForm(forms.ModelForm):
    """The definition as JSON text, saved through the service.

    The write happens while the form is validated, under the service's
    catalog lock: checking first and writing later would let another change
    land in between and make the check a lie. The admin's own save then
    only reads back the row the service wrote.
    """

    definition = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 24, "cols": 100, "spellcheck": "false", "class": "vLargeTextField"}),
        help_text="The model's fields as JSON (SPEC §2.2). Fields left out follow the cluster's defaults. "
                  "Saved through the same checks as the console and the API.")

    class Meta:
        model = StoredModel
        fields = ("definition",)

    # Set by StoredModelAdmin.get_form for the request at hand.
    acting_user = ""
    existing_name: str | None = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk and not self.is_bound:
            try:
                self.initial["definition"] = json.dumps(json.loads(self.instance.definition), indent=2,
                                                        ensure_ascii=False)
            except ValueError:
                pass  # a row that no longer decodes is shown as it is, to be replaced
        self.saved_model: dict | None = None

    def clean_definition(self):
        try:
            value = json.loads(self.cleaned_data["definition"])
        except ValueError as exc:
            raise forms.ValidationError(f"not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("the definition must be a JSON object of fields")
        return value

    def _post_clean(self):
        super()._post_clean()
        if self.errors:
            return
        definition = self.cleaned_data["definition"]
        try:
            if self.existing_name is None:
                self.saved_model = model_services.add_model(definition=definition, by=self.acting_user)
            else:
                self.saved_model = model_services.replace_model(name=self.existing_name, definition=definition,
                                                                by=self.acting_user)
        except CatalogError as exc:
            subject = self.existing_name or definition.get("name")
            for p in exc.problems:
                self.add_error("definition", _problem_line(p.model, subject, p.path, p.message))
        except Refusal as exc:
            self.add_error("definition", exc.message)


@admin.register(StoredModel)
class StoredModelAdmin(admin.ModelAdmin):
    form = StoredModelForm
    list_display = ("name", "engine", "source", "updated_at", "updated_by", "created_by")
    list_filter = ("updated_by",)
    search_fields = ("name", "definition")
    date_hierarchy = "updated_at"
    actions = ["remove_selected"]

    def get_readonly_fields(self, request, obj=None):
        return ("name", "created_at", "created_by", "updated_at", "updated_by") if obj else ()

    def get_fields(self, request, obj=None):
        return ("name", "definition", "created_at", "created_by", "updated_at", "updated_by") if obj \
            else ("definition",)

    def get_form(self, request, obj=None, change=False, **kwargs):
        base = super().get_form(request, obj, change=change, **kwargs)
        return type(base.__name__, (base,), {"acting_user": request.user.get_username(),
                                              "existing_name": obj.name if obj else None})

    def get_actions(self, request):
        actions = super().get_actions(request)
        # Django's bulk delete would delete rows around the service.
        actions.pop("delete_selected", None)
        return actions

    @staticmethod
    def _definition(obj) -> dict:
        try:
            value = json.loads(obj.definition)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    @admin.display(description="engine")
    def engine(self, obj):
        return self._definition(obj).get("engine", "(default)")

    @admin.display(description="source")
    def source(self, obj):
        return self._definition(obj).get("source", "")

    def save_model(self, request, obj, form, change):
        # The service wrote the row while the form was validated; give the
        # admin the row it wrote (for its log entry and redirect).
        stored = StoredModel.objects.get(name=form.saved_model["name"])
        obj.pk = stored.pk
        obj.refresh_from_db()

    def delete_model(self, request, obj):
        model_services.remove_model(name=obj.name, by=request.user.get_username())

    def delete_view(self, request, object_id, extra_context=None):
        try:
            return super().delete_view(request, object_id, extra_context)
        except Refusal as exc:
            # Raised inside the admin's transaction: its log entry is undone too.
            self.message_user(request, f"Not removed: {exc.message}", messages.ERROR)
            return redirect(reverse("admin:catalog_storedmodel_change", args=[object_id]))

    @admin.action(description="Remove the selected models (through the catalog service)")
    def remove_selected(self, request, queryset):
        by = request.user.get_username()
        removed = []
        for name in queryset.values_list("name", flat=True):
            try:
                with transaction.atomic():
                    model_services.remove_model(name=name, by=by)
            except Refusal as exc:
                self.message_user(request, f"Model {name} not removed: {exc.message}", messages.ERROR)
            else:
                removed.append(name)
        if removed:
            self.message_user(request, f"Removed {', '.join(removed)}.", messages.SUCCESS)


@admin.register(SettingsVersion)
class SettingsVersionAdmin(ReadOnlyAdmin):
    list_display = ("number", "author", "created_at", "comment", "parent")
    list_filter = ("author",)
    search_fields = ("comment", "author")
    date_hierarchy = "created_at"
    # The raw document holds the peers' tokens: shown masked, never raw.
    fields = ("number", "author", "created_at", "comment", "parent", "document_shown")
    readonly_fields = fields

    @admin.display(description="document (peer tokens masked)")
    def document_shown(self, obj):
        document = mask_secrets(obj.document) if isinstance(obj.document, dict) else obj.document
        return format_html("<pre>{}</pre>", yaml_text(document))


@admin.register(CatalogVersion)
class CatalogVersionAdmin(ReadOnlyAdmin):
    list_display = ("version", "short_digest", "created_at", "created_by", "reason", "settings_version")
    list_filter = ("created_by",)
    search_fields = ("reason", "digest")
    date_hierarchy = "created_at"
    fields = ("version", "digest", "created_at", "created_by", "reason", "settings_version", "models")
    readonly_fields = fields

    @admin.display(description="digest")
    def short_digest(self, obj):
        return obj.digest.removeprefix("sha256:")[:12]

    @admin.display(description="models")
    def models(self, obj):
        try:
            names = [m.get("name") for m in json.loads(obj.document) if isinstance(m, dict)]
        except (ValueError, TypeError):
            return "(the stored document does not decode)"
        url = reverse("catalog-version", kwargs={"number": obj.version})
        return format_html('{} models — <a href="{}">see them in the console</a>', len(names), url)

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        return qs if request.resolver_match and request.resolver_match.url_name.endswith("_change") \
            else qs.defer("document")


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("at", "actor", "action", "object_type", "object_id", "request_id")
    list_filter = ("action", "object_type")
    search_fields = ("actor", "object_id", "request_id")
    date_hierarchy = "at"
    fields = ("at", "actor", "action", "object_type", "object_id", "request_id", "before_shown", "after_shown")
    readonly_fields = fields

    @admin.display(description="before")
    def before_shown(self, obj):
        return format_html("<pre>{}</pre>", yaml_text(obj.before)) if obj.before is not None else "—"

    @admin.display(description="after")
    def after_shown(self, obj):
        return format_html("<pre>{}</pre>", yaml_text(obj.after)) if obj.after is not None else "—"


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    list_display = ("user", "name", "prefix", "created_at", "last_used_at", "revoked_at")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter),)
    search_fields = ("user__username", "name", "prefix")
    list_select_related = ("user",)
    # Only the hash is stored, and not even that is shown.
    fields = ("user", "name", "prefix", "created_at", "last_used_at", "revoked_at")
    readonly_fields = fields
    actions = ["revoke_selected"]

    @admin.action(description="Revoke the selected tokens")
    def revoke_selected(self, request, queryset):
        by = request.user.get_username()
        revoked = 0
        for token_id in queryset.filter(revoked_at=None).values_list("pk", flat=True):
            try:
                user_services.revoke_token(token_id=token_id, by=by)
            except NotFound:
                continue
            revoked += 1
        self.message_user(request, f"Revoked {revoked} token(s).", messages.SUCCESS)


@admin.register(Gateway)
class GatewayAdmin(ReadOnlyAdmin):
    list_display = ("name", "url", "enabled", "state", "acked_version", "last_seen", "failures", "short_error")
    list_filter = ("enabled",)
    search_fields = ("name", "url")
    # Never the token fields: the token is a live shared secret.
    fields = ("name", "url", "enabled", "state", "acked_version", "acked_digest", "rejected_version", "last_seen",
              "last_error", "failures", "next_attempt_at", "created_at", "updated_at")
    readonly_fields = fields

    def get_queryset(self, request):
        newest = CatalogVersion.objects.order_by("-version").values("version")[:1]
        return super().get_queryset(request).defer("token_encrypted", "token_hash").annotate(
            newest_version=Subquery(newest))

    @admin.display(description="state")
    def state(self, obj):
        newest = getattr(obj, "newest_version", None)
        return gateway_state(obj, SimpleNamespace(version=newest) if newest is not None else None)

    @admin.display(description="last error")
    def short_error(self, obj):
        return (obj.last_error[:80] + "…") if len(obj.last_error) > 80 else obj.last_error


@admin.register(PeerOffer)
class PeerOfferAdmin(ReadOnlyAdmin):
    list_display = ("peer", "model_count", "fetched_at", "checked_at", "short_error")
    search_fields = ("peer",)
    fields = ("peer", "model_count", "offered_shown", "digest", "etag", "fetched_at", "checked_at", "last_error",
              "updated_at")
    readonly_fields = fields

    @admin.display(description="models")
    def model_count(self, obj):
        return len(obj.offered) if isinstance(obj.offered, list) else 0

    @admin.display(description="offered")
    def offered_shown(self, obj):
        return format_html("<pre>{}</pre>", yaml_text(obj.offered))

    @admin.display(description="last error")
    def short_error(self, obj):
        return (obj.last_error[:80] + "…") if len(obj.last_error) > 80 else obj.last_error
