"""Bearer tokens for automation: ``Authorization: Bearer <token>``.

Only a token's SHA-256 is stored, so the lookup hashes what was sent.
``Token <key>`` is accepted too, for clients written against DRF's default.
"""

from __future__ import annotations

from rest_framework import authentication, exceptions

from .. import credentials
from ..models import ApiToken, Gateway, hash_token
from ..services.users import token_used

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
        fingerprint = hash_token(key)
        result = credentials.recall(fingerprint)
        if result is None:
            result = self._lookup(key, fingerprint)
            credentials.remember(fingerprint, result)
        return result

    def _lookup(self, key: str, fingerprint: str):
        token = ApiToken.objects.select_related("user").filter(key_hash=fingerprint, revoked_at=None).first()
        if token is not None and token.user.is_active:
            token_used(token)
            return token.user, token
        gateway = Gateway.objects.filter(token_hash=fingerprint, enabled=True).first()
        if gateway is not None:
            return GatewayIdentity(gateway), gateway
        peer = _peer_with_token(key)
        if peer is not None:
            return PeerIdentity(peer), None
        raise exceptions.AuthenticationFailed("the token is not valid or was revoked")

    def authenticate_header(self, request):
        return 'Bearer realm="llmgw"'


class ServiceIdentity:
    """Who a request is when it carries a gateway's or a peer's token.

    Not a user and holding no role: such a token reads the one document it
    exists for and nothing else, so a leaked one cannot change anything.
    """

    is_authenticated = True
    is_active = True
    is_superuser = False
    is_staff = False
    is_anonymous = False
    username = ""

    def get_username(self) -> str:
        return self.username

    def __str__(self) -> str:
        return self.username


class GatewayIdentity(ServiceIdentity):
    """A gateway: it may read the catalog."""

    def __init__(self, gateway: Gateway):
        self.gateway = gateway
        self.username = f"gateway:{gateway.name}"


class PeerIdentity(ServiceIdentity):
    """A peer cluster: it may read this cluster's offer."""

    def __init__(self, name: str):
        self.peer = name
        self.username = f"peer:{name}"


def _peer_with_token(key: str) -> str | None:
    """The peer (of the settings in force) whose shared token this is."""
    from ..secrets import equal
    from ..selectors import peers_of, settings_in_force

    for peer in peers_of(settings_in_force().document):
        token = peer.get("token")
        if isinstance(token, str) and token and equal(token, key):
            return peer.get("name")
    return None
