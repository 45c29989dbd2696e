"""``/api/v1/settings...``: the cluster settings document (SPEC §4, §8).

Reads for every role; writes for admins. Every write names the version it
is based on: ``base_version`` in the body, ``?base_version=`` on DELETE, or
an ``If-Match: "N"`` header.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from .. import selectors
from ..builder import CatalogError, Problem
from ..builder.rules import whole_number
from ..builder.settings import SettingsKeyError, diff_documents, get_key, mask_secrets
from ..models import SettingsVersion
from ..roles import ADMIN
from ..services import settings as settings_services
from ..services.errors import NotFound
from . import serializers as s
from .views import PAGE_PARAMETERS, READ_ERRORS, WRITE_ERRORS, ApiView, errors, found, paged
from .pagination import Pagination

IF_MATCH = OpenApiParameter("If-Match", OpenApiTypes.STR, OpenApiParameter.HEADER,
                            description='the version the change is based on, as "N" (instead of base_version)')


class LayerSerializer(serializers.Serializer):
    key = serializers.CharField()
    value = serializers.JSONField(allow_null=True)
    source = serializers.ChoiceField(choices=["store", "file"])
    ignored = serializers.BooleanField()


class SettingsSerializer(serializers.Serializer):
    version = serializers.IntegerField(allow_null=True)
    newest_version = serializers.IntegerField()
    document = serializers.DictField()
    layers = LayerSerializer(many=True)
    warnings = serializers.ListField(child=serializers.CharField())


class SettingsWriteSerializer(serializers.Serializer):
    document = serializers.JSONField(help_text="the cluster keys, as a mapping or as YAML text")
    comment = serializers.CharField(required=False, allow_blank=True)
    base_version = serializers.IntegerField(required=False)


class ImpactChangeSerializer(serializers.Serializer):
    name = serializers.CharField()
    fields = serializers.ListField(child=serializers.CharField())


class ImpactSerializer(serializers.Serializer):
    added = serializers.ListField(child=serializers.CharField())
    removed = serializers.ListField(child=serializers.CharField())
    changed = ImpactChangeSerializer(many=True)
    skipped = s.SkippedSerializer(many=True)
    restored = serializers.ListField(child=serializers.CharField())


class SettingsWriteResultSerializer(serializers.Serializer):
    version = serializers.IntegerField(allow_null=True)
    document = serializers.DictField()
    impact = ImpactSerializer()


class KeySerializer(serializers.Serializer):
    key = serializers.CharField()
    value = serializers.JSONField(allow_null=True)
    version = serializers.IntegerField(allow_null=True)


class KeyWriteSerializer(serializers.Serializer):
    value = serializers.JSONField(allow_null=True)
    comment = serializers.CharField(required=False, allow_blank=True)
    base_version = serializers.IntegerField(required=False)


class RollbackSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    comment = serializers.CharField(required=False, allow_blank=True)
    base_version = serializers.IntegerField(required=False)


class SettingsVersionSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    author = serializers.CharField()
    created_at = serializers.DateTimeField()
    comment = serializers.CharField(allow_blank=True)
    parent = serializers.IntegerField(allow_null=True)


class KeyChangeSerializer(serializers.Serializer):
    key = serializers.CharField()
    change = serializers.ChoiceField(choices=["added", "removed", "changed"])
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)


class SettingsDiffSerializer(serializers.Serializer):
    base = serializers.IntegerField()
    changes = KeyChangeSerializer(many=True)


class SettingsVersionDetailSerializer(SettingsVersionSerializer):
    document = serializers.JSONField()
    diff = SettingsDiffSerializer(required=False)


def _write_result(result) -> dict:
    return {"version": result.version, "document": result.document, "impact": result.impact}


class SettingsApiView(ApiView):
    write_role = ADMIN

    def base_version(self, body: dict | None = None) -> object:
        """From the body, the query string, or If-Match: "N"."""
        if body is not None and "base_version" in body:
            return body["base_version"]
        raw = self.request.query_params.get("base_version") or self.request.headers.get("If-Match", "")
        raw = raw.strip().removeprefix("W/").strip('"')
        if whole_number(raw) is not None:
            return whole_number(raw)
        if raw:
            raise CatalogError([Problem("", "base_version", "base_version must be a settings version number")])
        return None


class SettingsView(SettingsApiView):
    @extend_schema(responses={200: SettingsSerializer, **errors(*READ_ERRORS, 404)})
    def get(self, request):
        return Response(selectors.settings_view())

    @extend_schema(request=SettingsWriteSerializer, parameters=[IF_MATCH],
                   responses={200: SettingsWriteResultSerializer, **errors(*WRITE_ERRORS, 404, 409)})
    def put(self, request):
        body = self.body()
        result = settings_services.replace_settings(document=body.get("document"), base_version=self.base_version(body),
                                                    by=self.by(), comment=body.get("comment") or "")
        return Response(_write_result(result))


class SettingsPreviewView(SettingsApiView):
    @extend_schema(request=SettingsWriteSerializer, parameters=[IF_MATCH],
                   responses={200: SettingsWriteResultSerializer, **errors(*WRITE_ERRORS, 404, 409)})
    def post(self, request):
        body = self.body()
        result = settings_services.preview_settings(document=body.get("document"), base_version=self.base_version(body))
        return Response(_write_result(result))


KEY_PARAMETER = OpenApiParameter("key", OpenApiTypes.STR, OpenApiParameter.PATH,
                                 description="a dotted key, like defaults.scaling.max",
                                 pattern=r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")


class SettingsKeyView(SettingsApiView):
    @extend_schema(parameters=[KEY_PARAMETER], responses={200: KeySerializer, **errors(*READ_ERRORS, 404)})
    def get(self, request, key):
        settings = selectors.settings_in_force()
        try:
            value = get_key(mask_secrets(settings.document), key)
        except SettingsKeyError as exc:
            raise NotFound(str(exc)) from None
        return Response({"key": key, "value": value, "version": settings.version})

    @extend_schema(parameters=[KEY_PARAMETER, IF_MATCH], request=KeyWriteSerializer,
                   responses={200: SettingsWriteResultSerializer, **errors(*WRITE_ERRORS, 404, 409)})
    def put(self, request, key):
        body = self.body()
        if "value" not in body:
            raise CatalogError([Problem("", "value", "value is required (null unsets nothing; use DELETE)")])
        result = settings_services.set_setting(key=key, value=body["value"], base_version=self.base_version(body),
                                               by=self.by(), comment=body.get("comment") or "")
        return Response(_write_result(result))

    @extend_schema(parameters=[KEY_PARAMETER, IF_MATCH,
                               OpenApiParameter("base_version", OpenApiTypes.INT, required=False)],
                   request=None, responses={200: SettingsWriteResultSerializer, **errors(*WRITE_ERRORS, 404, 409)})
    def delete(self, request, key):
        result = settings_services.unset_setting(key=key, base_version=self.base_version(), by=self.by())
        return Response(_write_result(result))


class SettingsVersionsView(SettingsApiView):
    @extend_schema(operation_id="settings_versions_list", parameters=PAGE_PARAMETERS,
                   responses={200: paged(SettingsVersionSerializer), **errors(*READ_ERRORS, 404)})
    def get(self, request):
        paginator = Pagination()
        page = paginator.paginate_queryset(SettingsVersion.objects.defer("document").order_by("-number"),
                                           request, view=self)
        return paginator.get_paginated_response(
            SettingsVersionSerializer([selectors.settings_version_item(v) for v in page], many=True).data)


class SettingsVersionDetailView(SettingsApiView):
    @extend_schema(parameters=[OpenApiParameter("diff", OpenApiTypes.INT,
                                                description="another version to compare with, key by key")],
                   responses={200: SettingsVersionDetailSerializer, **errors(*READ_ERRORS, 400, 404)})
    def get(self, request, number):
        version = _settings_version_or_404(number)
        body = selectors.settings_version_item(version, with_document=True)
        other = request.query_params.get("diff")
        if other is not None:
            if whole_number(other) is None:
                raise CatalogError([Problem("", "diff", "diff must be a settings version number")])
            base = _settings_version_or_404(whole_number(other))
            before = mask_secrets(base.document) if isinstance(base.document, dict) else {}
            after = body["document"] if isinstance(body["document"], dict) else {}
            body["diff"] = {"base": base.number, "changes": diff_documents(before, after)}
        return Response(body)


def _settings_version_or_404(number: int) -> SettingsVersion:
    return found(SettingsVersion.objects.filter(number=number), f"no settings version {number}")


class SettingsRollbackView(SettingsApiView):
    @extend_schema(request=RollbackSerializer, parameters=[IF_MATCH],
                   responses={200: SettingsWriteResultSerializer, **errors(*WRITE_ERRORS, 404, 409)})
    def post(self, request):
        body = self.body()
        result = settings_services.rollback_settings(version=body.get("version"), base_version=self.base_version(body),
                                                     by=self.by(), comment=body.get("comment") or "")
        return Response(_write_result(result))
