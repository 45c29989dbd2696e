"""People, roles and API tokens: a token's key is shown once and kept nowhere."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from catalog.builder import CatalogError
from catalog.models import ApiToken, AuditEvent, hash_token
from catalog.roles import role_of
from catalog.services.errors import NotFound
from catalog.services.users import add_user, create_token, revoke_token

pytestmark = pytest.mark.django_db



@pytest.mark.parametrize("role", ["viewer", "operator", "admin"])
def test_add_user_gives_the_user_exactly_that_role(role):
    user = add_user(username="dana", role=role, password=None, by="root")
    assert role_of(user) == role
    assert list(user.groups.values_list("name", flat=True)) == [role]
    assert user.is_staff is (role == "admin")
    assert not user.has_usable_password()
    event = AuditEvent.objects.get(object_type="user", object_id="dana")
    assert (event.actor, event.action, event.after) == ("root", "user.add", {"role": role})


def test_add_user_again_changes_the_role_instead_of_adding_a_second_user():
    add_user(username="dana", role="admin", password="correct horse battery", by="root")
    user = add_user(username="dana", role="viewer", password=None, by="root")
    assert get_user_model().objects.filter(username="dana").count() == 1
    assert role_of(get_user_model().objects.get(username="dana")) == "viewer"
    assert not user.is_staff
    assert user.check_password("correct horse battery")  # no password given: the old one stays
    change = AuditEvent.objects.filter(object_id="dana").first()
    assert (change.action, change.before, change.after) == ("user.role", {"role": ["admin"]}, {"role": "viewer"})


def test_add_user_refuses_an_unknown_role():
    with pytest.raises(CatalogError) as refused:
        add_user(username="dana", role="superuser", password=None, by="root")
    assert "viewer" in refused.value.by_path()["role"][0]
    assert not get_user_model().objects.filter(username="dana").exists()


def test_create_token_refuses_an_unknown_user():
    with pytest.raises(NotFound):
        create_token(username="nobody", by="root")


def test_create_token_keeps_only_a_hash_of_the_key():
    add_user(username="dana", role="operator", password=None, by="root")
    key = create_token(username="dana", name="ci", by="root")
    token = ApiToken.objects.get()
    assert token.key_hash == hash_token(key) and token.name == "ci"
    assert key.startswith(token.prefix) and len(token.prefix) < len(key) // 2
    rows = [json.dumps(row, default=str) for row in ApiToken.objects.values()]
    rows += [json.dumps(row, default=str) for row in AuditEvent.objects.values()]
    assert not any(key in row for row in rows)
    assert not any(key[12:] in row for row in rows)  # not even the secret part


def test_a_token_authenticates_its_user_and_a_revoked_one_gets_401():
    add_user(username="dana", role="viewer", password=None, by="root")
    key = create_token(username="dana", by="root")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert client.get("/api/v1/models").status_code == 200
    assert ApiToken.objects.get().last_used_at is not None
    revoke_token(token_id=ApiToken.objects.get().pk, by="root")
    response = client.get("/api/v1/models")
    assert response.status_code == 401
    assert set(response.json()) == {"detail", "errors"}
    assert AuditEvent.objects.filter(action="token.revoke").count() == 1


def test_the_token_keyword_is_accepted_as_well_as_bearer():
    add_user(username="dana", role="viewer", password=None, by="root")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {create_token(username='dana', by='root')}")
    assert client.get("/api/v1/models").status_code == 200


def test_revoking_a_token_twice_is_refused():
    add_user(username="dana", role="viewer", password=None, by="root")
    create_token(username="dana", by="root")
    token_id = ApiToken.objects.get().pk
    revoke_token(token_id=token_id, by="root")
    with pytest.raises(NotFound):
        revoke_token(token_id=token_id, by="root")


def test_a_deactivated_users_token_gets_401():
    user = add_user(username="dana", role="admin", password=None, by="root")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {create_token(username='dana', by='root')}")
    user.is_active = False
    user.save()
    assert client.get("/api/v1/models").status_code == 401
