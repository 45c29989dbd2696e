"""JSON bodies with a size limit DRF does not enforce by itself.

DRF reads the request stream directly, past Django's
DATA_UPLOAD_MAX_MEMORY_SIZE check, so without this a client could make a
worker parse a body of any size.
"""

from __future__ import annotations

import io

from django.conf import settings
from rest_framework import status
from rest_framework.exceptions import APIException
from rest_framework.parsers import JSONParser


class BodyTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "the request body is too large"
    default_code = "body_too_large"


class LimitedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        request = (parser_context or {}).get("request")
        length = request.META.get("CONTENT_LENGTH") if request is not None else None
        if length and length.isdigit() and int(length) > limit:
            raise BodyTooLarge(f"the request body is larger than {limit} bytes")
        data = stream.read(limit + 1) if stream is not None else b""
        if len(data) > limit:
            raise BodyTooLarge(f"the request body is larger than {limit} bytes")
        return super().parse(io.BytesIO(data), media_type, parser_context)
