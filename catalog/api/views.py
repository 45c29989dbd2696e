"""REST API views: check the request's shape, call a service or selector,
serialise the answer. No catalog rule lives here."""

from __future__ import annotations

import json
from functools import lru_cache

from django.conf import settings
from django.db import connection
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework import status
from rest_framework.parsers import JSONParser
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import builder, selectors
from ..builder import CatalogError, Problem
from ..builder.rules import whole_number
from ..longpoll import wait_for_version_after
from ..models import AuditEvent, CatalogVersion
from ..roles import OPERATOR, VIEWER
from ..services import models as model_services
from ..services.catalog import refresh_catalog
from ..services.gateways import gateway_seen
from ..services.errors import NotFound
from . import serializers as s
from .pagination import Pagination
from .auth import GatewayIdentity
from .permissions import HasRole, HasRoleOrGatewayReads

NAME_PARAMETER = OpenApiParameter(
    "name", OpenApiTypes.STR, OpenApiParameter.PATH,
    description="a model's name (may contain '/' and ':'), or for GET an alias",
    pattern=r"^[A-Za-z0-9._:][A-Za-z0-9._:/]*$",
)


@lru_cache(maxsize=None)
def paged(serializer_class) -> serializers.Serializer:
    """The paginated list of SPEC §8: ``{count, next, previous, results}``."""
    return inline_serializer(
        name=f"Paginated{serializer_class.__name__.removesuffix('Serializer')}List",
        fields={"count": serializers.IntegerField(), "next": serializers.CharField(allow_null=True),
                "previous": serializers.CharField(allow_null=True), "results": serializer_class(many=True)},
    )


def errors(*codes: int) -> dict:
    """The documented error responses, all in the one error shape."""
    described = {
        400: "invalid input; `errors` maps each field path to its messages",
        401: "no valid token",
        403: "your role does not allow this",
        404: "no such model or version",
        409: "the state forbids it (declared model, removal that breaks others, stale version)",
        413: "the request body is too large",
        503: "the database is unavailable",
    }
    return {code: OpenApiResponse(s.ErrorSerializer, description=described[code]) for code in codes}


READ_ERRORS = (401, 403, 503)
PAGE_PARAMETERS = [OpenApiParameter("page", OpenApiTypes.INT), OpenApiParameter("page_size", OpenApiTypes.INT)]
WRITE_ERRORS = (400, 401, 403, 413, 503)


class ApiView(APIView):
    """Every endpoint: authenticated, role-checked JSON (bodies over
    DATA_UPLOAD_MAX_MEMORY_SIZE are refused with 413 by Django's own check)."""

    permission_classes = [HasRole]
    parser_classes = [JSONParser]
    read_role = VIEWER
    write_role = OPERATOR

    def by(self) -> str:
        return self.request.user.get_username()

    def body(self, shape: str = "a JSON object") -> dict:
        """The request body, which must be an object (the builder and the
        services check what is in it)."""
        if not isinstance(self.request.data, dict):
            raise CatalogError([Problem("", "", f"the body must be {shape}")])
        return self.request.data

    def paginated(self, items: list, serializer_class=None):
        paginator = Pagination()
        page = paginator.paginate_queryset(items, self.request, view=self)
        data = serializer_class(page, many=True).data if serializer_class else page
        return paginator.get_paginated_response(data)


class HealthView(APIView):
    """Liveness: answers without a token, says whether the database and the
    broker answer."""

    authentication_classes = []
    permission_classes = [AllowAny]

    @extend_schema(responses={200: s.HealthSerializer, 503: s.HealthSerializer}, auth=[])
    def get(self, request):
        database = "ok"
        try:
            connection.ensure_connection()
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        except Exception:  # any failure means the same thing to a probe
            database = "unavailable"
        broker = _broker_state()
        healthy = database == "ok"
        body = {"status": "ok" if healthy and broker != "unavailable" else "degraded",
                "database": database, "broker": broker}
        return Response(body, status=status.HTTP_200_OK if healthy else status.HTTP_503_SERVICE_UNAVAILABLE)


def _broker_state() -> str:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return "in-process"
    from llmgw_console.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=0, timeout=1)
        return "ok"
    except Exception:
        return "unavailable"


def _model_filters(request) -> dict:
    params = request.query_params
    return {"kind": params.get("kind") or None, "cls": params.get("class") or None,
            "owner": params.get("owner"), "engine": params.get("engine") or None, "q": params.get("q") or None}


class ModelsView(ApiView):
    @extend_schema(operation_id="models_list", 
        parameters=[
            OpenApiParameter("kind", OpenApiTypes.STR, enum=list(selectors.KINDS)),
            OpenApiParameter("class", OpenApiTypes.STR, enum=list(builder.CLASSES),
                             description="effective class"),
            OpenApiParameter("owner", OpenApiTypes.STR),
            OpenApiParameter("engine", OpenApiTypes.STR),
            OpenApiParameter("q", OpenApiTypes.STR, description="search names, aliases and descriptions"),
            *PAGE_PARAMETERS,
        ],
        responses={200: paged(s.ModelSerializer), **errors(*READ_ERRORS, 404)},
    )
    def get(self, request):
        state = selectors.in_force()
        models = selectors.list_models(state, **_model_filters(request))
        page = Pagination()
        items = page.paginate_queryset(models, request, view=self)
        return page.get_paginated_response([selectors.model_item(state, m) for m in items])

    @extend_schema(request=s.ModelDefinitionSerializer,
                   responses={201: s.ModelSerializer, **errors(*WRITE_ERRORS, 409)})
    def post(self, request):
        model = model_services.add_model(definition=request.data, by=self.by())
        return Response(selectors.model_item(selectors.in_force(), model), status=status.HTTP_201_CREATED)


class ModelDetailView(ApiView):
    def _item(self, model: dict) -> dict:
        state = selectors.in_force()
        return selectors.model_item(state, model)

    @extend_schema(parameters=[NAME_PARAMETER], responses={200: s.ModelDetailSerializer, **errors(*READ_ERRORS, 404)})
    def get(self, request, name):
        state = selectors.in_force()
        model = state.catalog.resolve(name)
        if model is None:
            raise NotFound(f"no model or alias {name!r} in the catalog")
        return Response({**selectors.model_item(state, model), "used_by": state.catalog.used_by(model["name"])})

    @extend_schema(parameters=[NAME_PARAMETER], request=s.ModelDefinitionSerializer,
                   responses={200: s.ModelSerializer, **errors(*WRITE_ERRORS, 404, 409)})
    def put(self, request, name):
        model = model_services.replace_model(name=name, definition=request.data, by=self.by())
        return Response(self._item(model))

    @extend_schema(parameters=[NAME_PARAMETER], request=s.ModelPatchSerializer,
                   responses={200: s.ModelSerializer, **errors(*WRITE_ERRORS, 404, 409)})
    def patch(self, request, name):
        model = model_services.update_model(name=name, changes=request.data, by=self.by())
        return Response(self._item(model))

    @extend_schema(parameters=[NAME_PARAMETER], request=None,
                   responses={204: None, **errors(401, 403, 404, 409, 503)})
    def delete(self, request, name):
        model_services.remove_model(name=name, by=self.by())
        return Response(status=status.HTTP_204_NO_CONTENT)


class ModelResourcesView(ApiView):
    @extend_schema(parameters=[NAME_PARAMETER], request=s.ResourcesSerializer,
                   responses={200: s.ModelSerializer, **errors(*WRITE_ERRORS, 404, 409)})
    def post(self, request, name):
        body = self.body("an object {profile?, min_memory_gb, cpu_cores}")
        profile = body.get("profile") or None
        if profile is not None and not isinstance(profile, str):
            raise CatalogError([Problem(name, "profile", "profile must be a profile's name")])
        model = model_services.set_resources(name=name, profile=profile, min_memory_gb=body.get("min_memory_gb"),
                                             cpu_cores=body.get("cpu_cores"), by=self.by())
        return Response(selectors.model_item(selectors.in_force(), model))


class SkippedView(ApiView):
    @extend_schema(parameters=PAGE_PARAMETERS,
                   responses={200: paged(s.SkippedSerializer), **errors(*READ_ERRORS, 404)})
    def get(self, request):
        skipped = [sk._asdict() for sk in selectors.in_force().catalog.skipped]
        return self.paginated(skipped)


class SourcesView(ApiView):
    @extend_schema(parameters=PAGE_PARAMETERS,
                   responses={200: paged(s.SourceSerializer), **errors(*READ_ERRORS, 404)})
    def get(self, request):
        sources = selectors.in_force().catalog.sources()
        return self.paginated([{"source": src, "models": names} for src, names in sources.items()])


def _etag(digest: str) -> str:
    return f'"{digest}"'


def _matches(if_none_match: str, digest: str) -> bool:
    tags = [t.strip().removeprefix("W/").strip('"') for t in if_none_match.split(",")]
    return digest in tags or "*" in tags


class CatalogView(ApiView):
    """The catalog in force, for people and for gateways pulling it."""

    permission_classes = [HasRoleOrGatewayReads]

    @extend_schema(
        parameters=[OpenApiParameter("If-None-Match", OpenApiTypes.STR, OpenApiParameter.HEADER),
                    OpenApiParameter("after", OpenApiTypes.INT, description="wait for a version newer than this"),
                    OpenApiParameter("wait", OpenApiTypes.INT, description="seconds to wait (at most 60)")],
        responses={200: s.CatalogDocumentSerializer, 304: OpenApiResponse(description="not modified"),
                   **errors(*READ_ERRORS, 400, 404)},
    )
    def get(self, request):
        after, wait = _long_poll(request)
        if isinstance(request.user, GatewayIdentity):
            gateway_seen(request.user.gateway)
        version = selectors.latest_catalog_version()
        if version is None:
            refresh_catalog(reason="first catalog", by="system")
            version = selectors.latest_catalog_version()
        if after is not None and wait and version.version <= after:
            wait_for_version_after(after, wait)
            version = selectors.latest_catalog_version()
        etag = _etag(version.digest)
        if _matches(request.headers.get("If-None-Match", ""), version.digest):
            response = HttpResponse(status=304)
        else:
            response = HttpResponse(selectors.catalog_document_bytes(version), content_type="application/json")
        response["ETag"] = etag
        response["X-Llmgw-Catalog-Version"] = str(version.version)
        return response


MAX_WAIT_SECONDS = 60


def _long_poll(request) -> tuple[int | None, int]:
    problems = []
    values = {}
    for key in ("after", "wait"):
        raw = request.query_params.get(key)
        if raw is None:
            values[key] = None
        elif whole_number(raw) is not None:
            values[key] = whole_number(raw)
        else:
            problems.append(Problem("", key, f"{key} must be a whole number"))
    if values.get("wait") is not None and values["wait"] > MAX_WAIT_SECONDS:
        problems.append(Problem("", "wait", f"wait is at most {MAX_WAIT_SECONDS} seconds"))
    if problems:
        raise CatalogError(problems)
    return values["after"], values["wait"] or 0


def _version_row(v: CatalogVersion) -> dict:
    return {"version": v.version, "digest": v.digest, "created_at": v.created_at, "created_by": v.created_by,
            "reason": v.reason, "settings_version": v.settings_version}


class CatalogVersionsView(ApiView):
    @extend_schema(operation_id="catalog_versions_list", parameters=PAGE_PARAMETERS,
                   responses={200: paged(s.CatalogVersionSerializer), **errors(*READ_ERRORS, 404)})
    def get(self, request):
        versions = CatalogVersion.objects.defer("document").order_by("-version")
        paginator = Pagination()
        page = paginator.paginate_queryset(versions, request, view=self)
        return paginator.get_paginated_response(s.CatalogVersionSerializer([_version_row(v) for v in page],
                                                                           many=True).data)


class CatalogVersionDetailView(ApiView):
    @extend_schema(parameters=[OpenApiParameter("diff", OpenApiTypes.INT,
                                                description="another version to compare with, model by model")],
                   responses={200: s.CatalogVersionDetailSerializer, **errors(*READ_ERRORS, 400, 404)})
    def get(self, request, number):
        version = _version_or_404(number)
        body = {**_version_row(version), "models": json.loads(version.document)}
        other = request.query_params.get("diff")
        if other is not None:
            if whole_number(other) is None:
                raise CatalogError([Problem("", "diff", "diff must be a catalog version number")])
            base = _version_or_404(whole_number(other))
            body["diff"] = {"base": base.version,
                            **builder.diff_models(json.loads(base.document), body["models"])}
        return Response(s.CatalogVersionDetailSerializer(body).data)


def found(queryset, missing: str):
    """The one row the query finds, or the API's 404 saying what is missing."""
    row = queryset.first()
    if row is None:
        raise NotFound(missing)
    return row


def _version_or_404(number: int) -> CatalogVersion:
    return found(CatalogVersion.objects.filter(version=number), f"no catalog version {number}")


class AuditView(ApiView):
    read_role = VIEWER

    @extend_schema(parameters=[
        OpenApiParameter("actor", OpenApiTypes.STR), OpenApiParameter("object", OpenApiTypes.STR),
        OpenApiParameter("since", OpenApiTypes.DATETIME), *PAGE_PARAMETERS],
        responses={200: paged(s.AuditEventSerializer), **errors(*READ_ERRORS, 400, 404)})
    def get(self, request):
        query = s.AuditQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        events = AuditEvent.objects.all()
        if "actor" in query.validated_data:
            events = events.filter(actor=query.validated_data["actor"])
        if "object" in query.validated_data:
            events = events.filter(object_id=query.validated_data["object"])
        if "since" in query.validated_data:
            events = events.filter(at__gte=query.validated_data["since"])
        paginator = Pagination()
        page = paginator.paginate_queryset(events, request, view=self)
        return paginator.get_paginated_response(s.AuditEventSerializer(page, many=True).data)


class NotFoundView(ApiView):
    """Unknown API paths answer in the API's error shape, not an HTML page."""

    @extend_schema(exclude=True)
    def get(self, request, rest=""):
        raise NotFound(f"no API endpoint {request.path}")

    post = put = patch = delete = get

