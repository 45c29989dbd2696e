"""``/api/v1/gateways...``: the registry and delivery state (SPEC §5, §8).

Everyone reads; admins register, change and remove; operators push.
Tokens are write-only: they are never in any answer.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiTypes, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from .. import selectors
from ..models import Gateway
from ..roles import ADMIN, OPERATOR
from ..services import gateways as gateway_services
from .pagination import Pagination
from .views import PAGE_PARAMETERS, READ_ERRORS, WRITE_ERRORS, ApiView, errors, found, paged


class GatewaySerializer(serializers.Serializer):
    name = serializers.CharField()
    url = serializers.CharField()
    enabled = serializers.BooleanField()
    state = serializers.ChoiceField(choices=list(selectors.GATEWAY_STATES))
    acked_version = serializers.IntegerField(allow_null=True)
    acked_digest = serializers.CharField(allow_null=True)
    last_seen = serializers.DateTimeField(allow_null=True)
    last_error = serializers.CharField(allow_null=True)


class GatewayRegisterSerializer(serializers.Serializer):
    name = serializers.CharField()
    url = serializers.CharField()
    token = serializers.CharField(write_only=True, min_length=16)
    enabled = serializers.BooleanField(required=False)


class GatewayPatchSerializer(serializers.Serializer):
    url = serializers.CharField(required=False)
    token = serializers.CharField(required=False, write_only=True, min_length=16)
    enabled = serializers.BooleanField(required=False)


GATEWAY_NAME = OpenApiParameter("name", OpenApiTypes.STR, OpenApiParameter.PATH,
                                pattern=r"^[a-z0-9][a-z0-9._-]*$")


def _gateway_or_404(name: str) -> Gateway:
    return found(Gateway.objects.filter(name=name), f"no gateway {name!r}")


class GatewaysView(ApiView):
    write_role = ADMIN

    @extend_schema(operation_id="gateways_list", parameters=PAGE_PARAMETERS,
                   responses={200: paged(GatewaySerializer), **errors(*READ_ERRORS, 404)})
    def get(self, request):
        latest = selectors.latest_catalog_version()
        paginator = Pagination()
        page = paginator.paginate_queryset(Gateway.objects.order_by("name"), request, view=self)
        return paginator.get_paginated_response([selectors.gateway_item(g, latest) for g in page])

    @extend_schema(request=GatewayRegisterSerializer,
                   responses={201: GatewaySerializer, **errors(*WRITE_ERRORS, 409)})
    def post(self, request):
        body = self.body()
        gateway = gateway_services.register_gateway(name=body.get("name"), url=body.get("url"),
                                                    token=body.get("token"), enabled=body.get("enabled", True),
                                                    by=self.by())
        gateway.refresh_from_db()
        return Response(selectors.gateway_item(gateway, selectors.latest_catalog_version()),
                        status=status.HTTP_201_CREATED)


class GatewayDetailView(ApiView):
    write_role = ADMIN

    @extend_schema(parameters=[GATEWAY_NAME], responses={200: GatewaySerializer, **errors(*READ_ERRORS, 404)})
    def get(self, request, name):
        return Response(selectors.gateway_item(_gateway_or_404(name), selectors.latest_catalog_version()))

    @extend_schema(parameters=[GATEWAY_NAME], request=GatewayPatchSerializer,
                   responses={200: GatewaySerializer, **errors(*WRITE_ERRORS, 404, 409)})
    def patch(self, request, name):
        gateway = gateway_services.update_gateway(name=name, changes=self.body(), by=self.by())
        gateway.refresh_from_db()
        return Response(selectors.gateway_item(gateway, selectors.latest_catalog_version()))

    @extend_schema(parameters=[GATEWAY_NAME], request=None, responses={204: None, **errors(401, 403, 404, 503)})
    def delete(self, request, name):
        gateway_services.remove_gateway(name=name, by=self.by())
        return Response(status=status.HTTP_204_NO_CONTENT)


class GatewayPushView(ApiView):
    write_role = OPERATOR

    @extend_schema(parameters=[GATEWAY_NAME], request=None,
                   responses={202: GatewaySerializer, **errors(401, 403, 404, 409, 503)})
    def post(self, request, name):
        item = gateway_services.push_now(name=name, by=self.by())
        return Response(item, status=status.HTTP_202_ACCEPTED)
