"""People and their API tokens."""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from .. import credentials
from ..builder import CatalogError, Problem
from ..models import ApiToken, hash_token
from ..roles import ROLES
from . import audit
from .errors import NotFound

TOKEN_PREFIX = "llmgw_"


def ensure_role_groups() -> None:
    for role in ROLES:
        Group.objects.get_or_create(name=role)


def add_user(*, username: str, role: str, password: str | None, by: str):
    """Create a user with one role; an existing user gets the new role."""
    if role not in ROLES:
        raise CatalogError([Problem("", "role", f"role must be one of {', '.join(ROLES)}")])
    User = get_user_model()
    with transaction.atomic():
        ensure_role_groups()
        user, created = User.objects.get_or_create(username=username)
        before = None if created else {"role": list(user.groups.values_list("name", flat=True))}
        if password:
            user.set_password(password)
        elif created:
            user.set_unusable_password()
        # The console's admins are Django admin's too: support staff read
        # every record there, and its writes go through the services.
        user.is_staff = user.is_superuser = role == "admin"
        user.save()
        user.groups.set([Group.objects.get(name=role)])
        audit.record(actor=by, action="user.add" if created else "user.role", object_type="user",
                     object_id=username, before=before, after={"role": role})
        credentials.forget_all()  # a remembered token may carry the old role
    return user


def create_token(*, username: str, name: str = "", by: str) -> str:
    """A new API token for a user. The key is returned once and never kept."""
    User = get_user_model()
    try:
        user = User.objects.get(username=username)
    except User.DoesNotExist:
        raise NotFound(f"no user {username!r}") from None
    key = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        token = ApiToken.objects.create(user=user, name=name, key_hash=hash_token(key), prefix=key[:12])
        audit.record(actor=by, action="token.create", object_type="token", object_id=str(token.pk),
                     before=None, after={"user": username, "name": name, "prefix": token.prefix})
    return key


def revoke_token(*, token_id: int, by: str) -> None:
    with transaction.atomic():
        token = ApiToken.objects.select_for_update().filter(pk=token_id, revoked_at=None).first()
        if token is None:
            raise NotFound(f"no active token {token_id}")
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        audit.record(actor=by, action="token.revoke", object_type="token", object_id=str(token.pk),
                     before={"prefix": token.prefix}, after=None)
        credentials.forget_all()  # stops working at once in this process


# Recording every use would turn each read into a write; a minute is enough
# to tell an operator whether a token is still in use.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def token_used(token: ApiToken) -> None:
    """Note that a token was used (not audited: it is not a change)."""
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
