"""``/api/v1/federation/...``: this cluster's offer to its peers, and the
peers' offers as fetched (SPEC §6)."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, OpenApiTypes, extend_schema
from rest_framework import serializers

from .. import builder, selectors
from ..roles import OPERATOR
from ..services.federation import fetch_all_peers
from .permissions import HasRoleOrPeerReads
from .views import READ_ERRORS, ApiView, errors, paged


class OfferedModelSerializer(serializers.Serializer):
    name = serializers.CharField()
    aliases = serializers.ListField(child=serializers.CharField())
    description = serializers.CharField(allow_blank=True)
    engine = serializers.CharField()


class OfferSerializer(serializers.Serializer):
    cluster = serializers.CharField(allow_blank=True)
    digest = serializers.CharField()
    models = OfferedModelSerializer(many=True)


class PeerSerializer(serializers.Serializer):
    name = serializers.CharField()
    url = serializers.CharField()
    fetched_at = serializers.DateTimeField(allow_null=True)
    checked_at = serializers.DateTimeField(allow_null=True)
    stale = serializers.BooleanField()
    last_error = serializers.CharField(allow_null=True)
    models = serializers.ListField(child=serializers.CharField())


class OfferView(ApiView):
    permission_classes = [HasRoleOrPeerReads]

    @extend_schema(parameters=[OpenApiParameter("If-None-Match", OpenApiTypes.STR, OpenApiParameter.HEADER)],
                   responses={200: OfferSerializer, 304: OpenApiResponse(description="not modified"),
                              **errors(*READ_ERRORS, 404)})
    def get(self, request):
        offer = selectors.offer(selectors.in_force())
        etag = f'"{offer["digest"]}"'
        if etag in [t.strip() for t in request.headers.get("If-None-Match", "").split(",")]:
            response = HttpResponse(status=304)
        else:
            response = HttpResponse(builder.canonical_json(offer), content_type="application/json")
        response["ETag"] = etag
        return response


class PeersView(ApiView):
    write_role = OPERATOR

    @extend_schema(responses={200: paged(PeerSerializer), **errors(*READ_ERRORS, 404)})
    def get(self, request):
        return self.paginated(selectors.peer_items())


class PeersFetchView(ApiView):
    write_role = OPERATOR

    @extend_schema(request=None, responses={200: paged(PeerSerializer), **errors(401, 403, 503)})
    def post(self, request):
        fetch_all_peers(force=True)
        return self.paginated(selectors.peer_items())
