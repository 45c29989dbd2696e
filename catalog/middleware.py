"""Gives every request an id that its audit rows and its response carry; turns
a database outage into a 503 rather than a 500."""

from __future__ import annotations

import logging
import re
import uuid

from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.template.loader import render_to_string

from .context import request_id
from .settings_file import SettingsFileError

log = logging.getLogger("llmgw.console")

# A proxy's id is kept only when it looks like one, so nothing a client sends
# ends up unchecked in the audit log.
_INCOMING = re.compile(r"[A-Za-z0-9._-]{8,64}")


class RequestIdMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        incoming = request.headers.get("X-Request-Id", "")
        rid = incoming if _INCOMING.fullmatch(incoming) else uuid.uuid4().hex
        request.request_id = rid
        token = request_id.set(rid)
        try:
            response = self.get_response(request)
        finally:
            request_id.reset(token)
        response["X-Request-Id"] = rid
        return response


class DatabaseUnavailableMiddleware:
    """A console page whose database went away (a restart, a failover)
    answers 503 with a plain page that retries, not a 500 with a trace: the
    outage is brief and nobody's input was at fault.

    The page is rendered without the request, so nothing on it (the
    navigation, the user's role) needs the database that is down. The API
    answers its own 503 in its error shape (catalog/api/errors.py); this
    covers whatever reaches here from it anyway.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, SettingsFileError):
            # The machine's settings file could not be imported at first
            # start: a deployment problem to fix, not a bug to trace.
            log.error("%s", exception)
            response = HttpResponse(render_to_string("503.html", {"settings_problem": str(exception)}), status=503)
            response["Retry-After"] = "30"
            return response
        if not isinstance(exception, (OperationalError, InterfaceError)):
            return None
        log.warning("database unavailable on %s: %s", request.path, exception)
        if request.path.startswith("/api/"):
            response = JsonResponse({"detail": "the database is unavailable; try again shortly", "errors": {}},
                                    status=503)
        else:
            response = HttpResponse(render_to_string("503.html"), status=503)
        response["Retry-After"] = "5"
        return response
