"""The API's shapes, for the OpenAPI schema and for request shape checks.

Model definitions are not validated here: the builder is the one place
every catalog rule lives, and a serializer that checked them too would
drift from it. These serializers describe the shapes (so the schema tells
automation what to send and what comes back) and check only what is not a
catalog rule, such as a query parameter being a number.
"""

from __future__ import annotations

from rest_framework import serializers

from ..builder import CLASSES
from ..services.models import PATCHABLE


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
    errors = serializers.DictField(child=serializers.ListField(child=serializers.CharField()),
                                   help_text="field path (dotted, list indexes as numbers) -> messages")


class OriginSerializer(serializers.Serializer):
    repo = serializers.CharField(required=False, allow_blank=True)
    revision = serializers.CharField(required=False, allow_blank=True)
    digest = serializers.CharField(required=False, allow_blank=True)
    fetched_at = serializers.CharField(required=False, allow_blank=True)


class AdapterSerializer(serializers.Serializer):
    name = serializers.CharField()
    source = serializers.CharField()


class ProfileSerializer(serializers.Serializer):
    name = serializers.CharField()
    gpus = serializers.IntegerField(min_value=0, required=False)
    gpu_type = serializers.CharField(required=False, allow_blank=True)
    gpu_memory_gb = serializers.IntegerField(min_value=0, required=False)
    min_memory_gb = serializers.IntegerField(min_value=0, required=False)
    cpu_cores = serializers.IntegerField(min_value=0, required=False)


class ScalingSerializer(serializers.Serializer):
    min = serializers.IntegerField(min_value=0, required=False)
    max = serializers.IntegerField(min_value=1, required=False)


class CanarySerializer(serializers.Serializer):
    model = serializers.CharField()
    percent = serializers.IntegerField(min_value=1, max_value=99)


class EvalSerializer(serializers.Serializer):
    suite = serializers.CharField()
    min_score = serializers.FloatField(min_value=0.0, max_value=1.0)


def _class_field(**kwargs):
    return serializers.ChoiceField(choices=["", *CLASSES], **kwargs)


class _ModelFields(serializers.Serializer):
    """The fields of SPEC §2.2."""

    name = serializers.CharField(max_length=200)
    aliases = serializers.ListField(child=serializers.CharField(), required=False)
    description = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    engine = serializers.CharField(required=False)
    source = serializers.CharField(required=False)
    origin = OriginSerializer(required=False, allow_null=True)
    adapters = AdapterSerializer(many=True, required=False)
    profiles = ProfileSerializer(many=True, required=False)
    scaling = ScalingSerializer(required=False)
    owner = serializers.CharField(required=False, allow_blank=True)
    canary = CanarySerializer(required=False, allow_null=True)
    eval = EvalSerializer(required=False, allow_null=True)
    fallbacks = serializers.ListField(child=serializers.CharField(), required=False)

    def get_fields(self):
        fields = super().get_fields()
        fields["class"] = _class_field(required=False, allow_blank=True)  # a keyword in Python
        return fields


class ModelDefinitionSerializer(_ModelFields):
    """A runtime model as it is added (POST) or replaced (PUT)."""


class ModelPatchSerializer(_ModelFields):
    """Any of the fields an update may change, applied in one rebuild."""

    def get_fields(self):
        return {name: field for name, field in super().get_fields().items() if name in PATCHABLE}


class ModelSerializer(_ModelFields):
    """A model as built: defaults applied. A federated model carries only
    name, aliases, description, engine and its peer."""

    peer = serializers.CharField(required=False)
    kind = serializers.ChoiceField(choices=["declared", "federated", "runtime"])
    effective_class = _class_field(allow_null=True)
    warnings = serializers.ListField(child=serializers.CharField())


class UsedBySerializer(serializers.Serializer):
    fallback_of = serializers.ListField(child=serializers.CharField())
    canary_of = serializers.ListField(child=serializers.CharField())


class ModelDetailSerializer(ModelSerializer):
    used_by = UsedBySerializer()


class ResourcesSerializer(serializers.Serializer):
    profile = serializers.CharField(required=False, allow_blank=True,
                                    help_text="the profile to change; every profile when omitted")
    min_memory_gb = serializers.IntegerField(min_value=0)
    cpu_cores = serializers.IntegerField(min_value=0)


class SkippedSerializer(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.CharField()
    reason = serializers.CharField()


class SourceSerializer(serializers.Serializer):
    source = serializers.CharField()
    models = serializers.ListField(child=serializers.CharField())


class CatalogDocumentSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    digest = serializers.CharField()
    created_at = serializers.DateTimeField()
    settings_version = serializers.IntegerField(allow_null=True)
    models = serializers.ListField(child=serializers.DictField())


class CatalogVersionSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    digest = serializers.CharField()
    created_at = serializers.DateTimeField()
    created_by = serializers.CharField()
    reason = serializers.CharField()
    settings_version = serializers.IntegerField(allow_null=True)


class ModelChangeSerializer(serializers.Serializer):
    name = serializers.CharField()
    fields = serializers.ListField(child=serializers.CharField())


class CatalogDiffSerializer(serializers.Serializer):
    base = serializers.IntegerField()
    added = serializers.ListField(child=serializers.CharField())
    removed = serializers.ListField(child=serializers.CharField())
    changed = ModelChangeSerializer(many=True)


class CatalogVersionDetailSerializer(CatalogVersionSerializer):
    models = serializers.ListField(child=serializers.DictField())
    diff = CatalogDiffSerializer(required=False)


class AuditEventSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    at = serializers.DateTimeField()
    actor = serializers.CharField()
    action = serializers.CharField()
    object_type = serializers.CharField()
    object_id = serializers.CharField()
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)
    request_id = serializers.CharField(allow_blank=True)


class AuditQuerySerializer(serializers.Serializer):
    actor = serializers.CharField(required=False)
    object = serializers.CharField(required=False)
    since = serializers.DateTimeField(required=False)


class HealthSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "degraded"])
    database = serializers.ChoiceField(choices=["ok", "unavailable"])
    broker = serializers.ChoiceField(choices=["ok", "in-process", "unavailable"])
