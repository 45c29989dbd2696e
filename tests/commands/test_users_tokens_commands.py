"""``manage.py users`` and ``manage.py tokens``."""

import getpass
import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from catalog.models import AuditEvent
from catalog.roles import role_of
from catalog.services.users import add_user

CLI_ACTOR = f"cli:{getpass.getuser()}"


@pytest.fixture
def alice(db):
    return add_user(username="alice", role="operator", password=None, by="tests")


def test_users_add_reads_the_password_from_the_named_variable(run, monkeypatch):
    monkeypatch.setenv("ALICE_PASSWORD", "a long enough passphrase")

    out = run("users", "add", "alice", "--role", "operator", "--password-from-env", "ALICE_PASSWORD")

    assert "alice" in out and "operator" in out
    user = get_user_model().objects.get(username="alice")
    assert role_of(user) == "operator"
    assert Client().login(username="alice", password="a long enough passphrase")
    event = AuditEvent.objects.get(object_type="user", object_id="alice")
    assert event.actor == CLI_ACTOR
    assert "a long enough passphrase" not in json.dumps([event.before, event.after])


@pytest.mark.parametrize("value", [None, ""])
def test_users_add_refuses_a_named_variable_that_is_unset_or_empty(run, monkeypatch, value):
    if value is None:
        monkeypatch.delenv("NO_SUCH_PASSWORD", raising=False)
    else:
        monkeypatch.setenv("NO_SUCH_PASSWORD", value)

    line = run.refused("users", "add", "bob", "--role", "viewer", "--password-from-env", "NO_SUCH_PASSWORD")

    assert "NO_SUCH_PASSWORD" in line
    assert not get_user_model().objects.filter(username="bob").exists()


def test_users_add_without_a_password_makes_a_token_only_user(run):
    assert run.json("users", "add", "carol", "--role", "viewer") == {
        "username": "carol", "role": "viewer", "password_set": False}

    assert not get_user_model().objects.get(username="carol").has_usable_password()


def test_users_add_gives_an_existing_user_the_new_role(run, alice):
    run("users", "add", "alice", "--role", "admin", "--as", "ops-lead")

    assert role_of(get_user_model().objects.get(username="alice")) == "admin"
    assert AuditEvent.objects.filter(object_id="alice", actor="ops-lead").exists()


def test_users_add_refuses_an_unknown_role(run):
    from django.core.management import CommandError

    with pytest.raises(CommandError):
        run("users", "add", "dave", "--role", "root")
    assert not get_user_model().objects.filter(username="dave").exists()


def test_tokens_create_prints_the_token_alone_and_it_authenticates(run, alice):
    out = run("tokens", "create", "alice", "--name", "ci")

    token = out.strip()
    assert out == token + "\n" and token and " " not in token
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = api.get("/api/v1/models")
    assert response.status_code == 200
    assert response.json()["count"] >= 2
    assert AuditEvent.objects.filter(action="token.create", actor=CLI_ACTOR).exists()


def test_tokens_create_refuses_an_unknown_user(run, db):
    assert "nobody" in run.refused("tokens", "create", "nobody")


def test_tokens_list_shows_prefix_and_label_never_the_key(run, alice):
    key = run("tokens", "create", "alice", "--name", "ci").strip()
    run("tokens", "create", "alice", "--name", "laptop")

    tokens = run.json("tokens", "list", "alice")
    table = run("tokens", "list", "alice")

    assert [t["name"] for t in tokens] == ["ci", "laptop"]
    assert key.startswith(tokens[0]["prefix"])
    assert tokens[0]["created_at"] and tokens[0]["revoked_at"] is None
    assert {"id", "prefix", "name", "created_at", "last_used_at", "revoked_at"} == set(tokens[0])
    assert key not in json.dumps(tokens) and key not in table
    assert "laptop" in table


def test_tokens_list_records_use_and_revocation(run, alice):
    key = run("tokens", "create", "alice").strip()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    api.get("/api/v1/models")
    [token] = run.json("tokens", "list", "alice")
    assert token["last_used_at"] is not None

    run("tokens", "revoke", str(token["id"]))

    assert run.json("tokens", "list", "alice")[0]["revoked_at"] is not None
    assert api.get("/api/v1/models").status_code == 401


def test_tokens_list_refuses_an_unknown_user(run, db):
    assert "nobody" in run.refused("tokens", "list", "nobody")


def test_an_admin_added_from_the_cli_can_read_django_admin(run, monkeypatch):
    # SPEC §1: support staff use Django admin; the admin role must open it.
    monkeypatch.setenv("ERIN_PASSWORD", "a long enough passphrase")
    run("users", "add", "erin", "--role", "admin", "--password-from-env", "ERIN_PASSWORD")
    client = Client()
    assert client.login(username="erin", password="a long enough passphrase")

    assert client.get("/admin/catalog/auditevent/").status_code == 200
