"""Bearer tokens for automation: ``Authorization: Bearer <token>``.

Only a token's SHA-256 is stored, so the lookup hashes what was sent.
``Token <key>`` is accepted too, for clients written against DRF's default.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from rest_framework import authentication, exceptions

from ..models import ApiToken, hash_token

# Recording every use would turn each read into a write; a minute is enough
# to tell an operator whether a token is still in use.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keywords = ("bearer", "token")

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].decode("latin-1").lower() not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("the Authorization header must be 'Bearer <token>'")
        try:
            key = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("the token is not valid") from None
        token = (ApiToken.objects.select_related("user")
                 .filter(key_hash=hash_token(key), revoked_at=None).first())
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("the token is not valid or was revoked")
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request):
        return 'Bearer realm="llmgw"'
