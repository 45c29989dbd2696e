"""Roles on the API: reading needs ``read_role``, anything else ``write_role``."""

from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, BasePermission

from ..roles import OPERATOR, VIEWER, has_role


class HasRole(BasePermission):
    message = "your role does not allow this"

    def has_permission(self, request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False  # DRF answers 401: an authenticator offers a challenge
        needed = getattr(view, "read_role", VIEWER) if request.method in SAFE_METHODS \
            else getattr(view, "write_role", OPERATOR)
        return has_role(request.user, needed)


class HasRoleOrGatewayReads(HasRole):
    """The catalog: readable by every role, and by gateways with their token."""

    def has_permission(self, request, view) -> bool:
        from .auth import GatewayIdentity

        if isinstance(request.user, GatewayIdentity):
            return request.method in SAFE_METHODS
        return super().has_permission(request, view)


class HasRoleOrPeerReads(HasRole):
    """The federation offer: readable by peers with their token, and by people."""

    def has_permission(self, request, view) -> bool:
        from .auth import PeerIdentity

        if isinstance(request.user, PeerIdentity):
            return request.method in SAFE_METHODS
        return super().has_permission(request, view)
