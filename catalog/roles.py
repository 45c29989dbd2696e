"""The three roles, as Django groups. Higher roles can do what lower ones can."""

from __future__ import annotations

VIEWER, OPERATOR, ADMIN = "viewer", "operator", "admin"
ROLES = (VIEWER, OPERATOR, ADMIN)
_RANK = {VIEWER: 1, OPERATOR: 2, ADMIN: 3}


def role_of(user) -> str | None:
    """The highest role a user holds; a superuser is an admin."""
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return ADMIN
    if not hasattr(user, "groups"):
        return None  # a gateway's or peer's token: no role at all
    names = getattr(user, "_llmgw_groups", None)
    if names is None:
        names = set(user.groups.values_list("name", flat=True))
        user._llmgw_groups = names  # one query per request, not per check
    best = None
    for name in names:
        if name in _RANK and (best is None or _RANK[name] > _RANK[best]):
            best = name
    return best


def has_role(user, needed: str) -> bool:
    role = role_of(user)
    return role is not None and _RANK[role] >= _RANK[needed]
