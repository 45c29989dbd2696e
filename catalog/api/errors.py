"""One error shape for the whole API (SPEC §8):

    {"detail": "<sentence>", "errors": {"<field path>": ["<message>", ...]}}

Field paths are dotted with list indexes (``profiles.0.min_memory_gb``).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response

from ..builder import CatalogError
from ..services.errors import Conflict, NotFound
from ..settings_file import SettingsFileError

log = logging.getLogger("llmgw.api")

# An error that is not about one field of the thing being changed.
GENERAL = "non_field_errors"


def error_body(detail: str, errors: dict | None = None) -> dict:
    return {"detail": detail, "errors": errors or {}}


def catalog_error_errors(exc: CatalogError, subject: str | None) -> dict[str, list[str]]:
    """Problems of the model being changed by their field path; problems the
    change would cause in other models under GENERAL, naming the model."""
    errors: dict[str, list[str]] = {}
    for p in exc.problems:
        if subject is None or p.model == subject or p.model in ("", None) or p.model.startswith("#"):
            key = p.path or GENERAL
            message = p.message
        else:
            key = GENERAL
            message = f"model {p.model!r}: {p.path + ': ' if p.path else ''}{p.message}"
        errors.setdefault(key, []).append(message)
    return errors


def _flatten(data, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested ValidationError detail as dotted paths."""
    out: dict[str, list[str]] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            key = GENERAL if key == "non_field_errors" and not prefix else key
            out.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(data, list) and data and all(not isinstance(v, (dict, list)) for v in data):
        out.setdefault(prefix or GENERAL, []).extend(str(v) for v in data)
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out.update(_flatten(value, f"{prefix}.{i}" if prefix else str(i)))
    else:
        out.setdefault(prefix or GENERAL, []).append(str(data))
    return out


def _subject(context) -> str | None:
    name = (context.get("kwargs") or {}).get("name")
    if name:
        return name
    request = context.get("request")
    try:
        data = request.data if request is not None else None
    except exceptions.APIException:
        return None
    return data.get("name") if isinstance(data, dict) and isinstance(data.get("name"), str) else None


def exception_handler(exc, context):
    if isinstance(exc, CatalogError):
        errors = catalog_error_errors(exc, _subject(context))
        return Response(error_body(exc.summary(), errors), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, Conflict):
        return Response(error_body(exc.message), status=status.HTTP_409_CONFLICT)
    if isinstance(exc, NotFound):
        return Response(error_body(exc.message), status=status.HTTP_404_NOT_FOUND)
    if isinstance(exc, (OperationalError, InterfaceError)) or type(exc) is DatabaseError:
        # The database went away (restart, failover): say so, and let the
        # client retry; the connection is re-established on the next request.
        log.warning("database unavailable: %s", exc)
        return Response(error_body("the database is unavailable; try again shortly"),
                        status=status.HTTP_503_SERVICE_UNAVAILABLE, headers={"Retry-After": "5"})
    if isinstance(exc, RequestDataTooBig):
        return Response(error_body(f"the request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes"),
                        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, SettingsFileError):
        # The machine's file is broken: a deployment problem, not the
        # client's; say what to fix rather than answer 500.
        log.error("%s", exc)
        return Response(error_body(str(exc)), status=status.HTTP_503_SERVICE_UNAVAILABLE)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    if not isinstance(exc, exceptions.APIException):
        return None  # a bug: Django's 500 handler logs it
    headers = {}
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = exc.auth_header
    if getattr(exc, "wait", None):
        headers["Retry-After"] = str(int(exc.wait))
    if isinstance(exc, exceptions.ValidationError):
        errors = _flatten(exc.detail)
        detail = "the request is invalid: " + "; ".join(
            f"{path}: {msgs[0]}" if path != GENERAL else msgs[0] for path, msgs in list(errors.items())[:3])
        return Response(error_body(detail, errors), status=exc.status_code, headers=headers)
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    return Response(error_body(str(detail)), status=exc.status_code, headers=headers)
