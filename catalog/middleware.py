"""Gives every request an id that its audit rows and its response carry."""

from __future__ import annotations

import re
import uuid

from .context import request_id

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
