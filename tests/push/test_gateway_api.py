"""``/api/v1/gateways``: the registry, its roles, and what a gateway's own
token may do (SPEC §5, §8; QUALITY.md R8 for the gateway token).

Plain ``db``: the delivery a registration queues runs on commit, which
never comes here, so these tests see the registry alone.
"""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from catalog.models import AuditEvent, Gateway

pytestmark = pytest.mark.django_db


TOKEN = "gw-secret-0123456789abcdef"
OTHER_TOKEN = "gw-secret-fedcba9876543210"
URL = "http://gw-1.example:8080"
FIELDS = {"name", "url", "enabled", "state", "acked_version", "acked_digest", "last_seen", "last_error"}


def register(api, name: str = "gw-1", url: str = URL, token: str = TOKEN, **more):
    return api.post("/api/v1/gateways", {"name": name, "url": url, "token": token, **more}, format="json")


def registered(api, name: str = "gw-1", token: str = TOKEN, **more) -> dict:
    response = register(api, name, token=token, **more)
    assert response.status_code == 201, response.content
    return response.json()


def assert_error(response, status: int) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"detail", "errors"} and isinstance(body["detail"], str)
    return body


def gateway_client(token: str = TOKEN) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


# --- register -----------------------------------------------------------------

def test_register_answers_201_with_the_gateway_and_never_its_token(admin_api):
    response = register(admin_api)

    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == FIELDS
    assert body == {"name": "gw-1", "url": URL, "enabled": True, "state": "never_seen", "acked_version": None,
                    "acked_digest": None, "last_seen": None, "last_error": None}
    assert TOKEN not in response.content.decode()


def test_the_token_is_stored_encrypted_not_as_given(admin_api):
    registered(admin_api)

    row = Gateway.objects.values().get(name="gw-1")
    assert TOKEN not in json.dumps(row, default=str)
    assert row["token_encrypted"] and row["token_hash"]


def test_the_audit_row_of_a_registration_does_not_hold_the_token(admin_api):
    registered(admin_api)
    admin_api.patch("/api/v1/gateways/gw-1", {"token": OTHER_TOKEN}, format="json")

    rows = list(AuditEvent.objects.filter(object_type="gateway").values("action", "before", "after"))
    assert [r["action"] for r in rows] == ["gateway.update", "gateway.add"]
    assert TOKEN not in json.dumps(rows) and OTHER_TOKEN not in json.dumps(rows)
    audit = admin_api.get("/api/v1/audit", {"object": "gw-1"})
    assert audit.status_code == 200 and audit.json()["count"] == 2
    assert TOKEN not in audit.content.decode() and OTHER_TOKEN not in audit.content.decode()


def test_register_refuses_a_name_already_registered_with_409(admin_api):
    registered(admin_api)

    assert_error(register(admin_api, token=OTHER_TOKEN), 409)
    assert Gateway.objects.count() == 1


def test_register_refuses_a_token_another_gateway_uses_with_409_without_echoing_it(admin_api):
    registered(admin_api)

    response = register(admin_api, "gw-2")

    assert_error(response, 409)
    assert TOKEN not in response.content.decode()


@pytest.mark.parametrize("field, value", [
    ("url", "not a url"),
    ("url", "ftp://gw.example/"),
    ("url", ""),
    ("token", "short"),
    ("token", 12345678901234567),
    ("name", "Has Spaces"),
    ("name", ""),
    ("enabled", "yes"),
])
def test_register_refuses_bad_input_with_400_naming_the_field(admin_api, field, value):
    body = {"name": "gw-1", "url": URL, "token": TOKEN, field: value}

    response = admin_api.post("/api/v1/gateways", body, format="json")

    errors = assert_error(response, 400)["errors"]
    assert list(errors) == [field]
    assert not Gateway.objects.exists()
    if field == "token":
        assert str(value) not in response.content.decode()


def test_register_names_every_missing_field(admin_api):
    errors = assert_error(admin_api.post("/api/v1/gateways", {}, format="json"), 400)["errors"]

    assert set(errors) == {"name", "url", "token"}


def test_register_refuses_a_body_that_is_not_an_object(admin_api):
    assert_error(admin_api.post("/api/v1/gateways", ["gw-1"], format="json"), 400)


# --- read -----------------------------------------------------------------------

def test_list_shows_each_gateway_with_its_delivery_state(admin_api, viewer_api):
    registered(admin_api, "gw-b", token=OTHER_TOKEN)
    registered(admin_api, "gw-a")

    body = viewer_api.get("/api/v1/gateways").json()

    assert body["count"] == 2 and body["next"] is None
    assert [g["name"] for g in body["results"]] == ["gw-a", "gw-b"]
    assert all(set(g) == FIELDS for g in body["results"])
    assert TOKEN not in json.dumps(body) and OTHER_TOKEN not in json.dumps(body)


def test_get_shows_what_the_gateway_acknowledged_and_the_last_error(admin_api, viewer_api):
    from catalog import selectors

    registered(admin_api)
    assert viewer_api.get("/api/v1/catalog").status_code == 200  # the first catalog version
    latest = selectors.latest_catalog_version()
    Gateway.objects.filter(name="gw-1").update(acked_version=latest.version, acked_digest=latest.digest,
                                               last_error="")

    body = viewer_api.get("/api/v1/gateways/gw-1").json()

    assert body["state"] == "in_sync"
    assert (body["acked_version"], body["acked_digest"]) == (latest.version, latest.digest)
    Gateway.objects.filter(name="gw-1").update(failures=2, acked_version=None, last_error="HTTP 500: boom")
    body = viewer_api.get("/api/v1/gateways/gw-1").json()
    assert (body["state"], body["last_error"]) == ("failing", "HTTP 500: boom")


def test_get_of_an_unknown_gateway_is_404(viewer_api):
    assert_error(viewer_api.get("/api/v1/gateways/nope"), 404)


# --- change and remove ----------------------------------------------------------

def test_patch_changes_the_url_and_enabled(admin_api):
    registered(admin_api)

    response = admin_api.patch("/api/v1/gateways/gw-1", {"url": "https://gw-1.example/base", "enabled": False},
                               format="json")

    assert response.status_code == 200, response.content
    assert response.json()["url"] == "https://gw-1.example/base" and response.json()["enabled"] is False
    row = Gateway.objects.get(name="gw-1")
    assert (row.url, row.enabled) == ("https://gw-1.example/base", False)


def test_patch_of_the_token_makes_the_new_one_pull_and_the_old_one_fail(admin_api):
    registered(admin_api)

    response = admin_api.patch("/api/v1/gateways/gw-1", {"token": OTHER_TOKEN}, format="json")

    assert response.status_code == 200 and OTHER_TOKEN not in response.content.decode()
    assert gateway_client(OTHER_TOKEN).get("/api/v1/catalog").status_code == 200
    assert gateway_client(TOKEN).get("/api/v1/catalog").status_code == 401


@pytest.mark.parametrize("change, field", [
    ({"url": "nope"}, "url"),
    ({"token": "short"}, "token"),
    ({"enabled": "no"}, "enabled"),
    ({"name": "renamed"}, "name"),
])
def test_patch_refuses_bad_changes_with_400_naming_the_field(admin_api, change, field):
    registered(admin_api)

    errors = assert_error(admin_api.patch("/api/v1/gateways/gw-1", change, format="json"), 400)["errors"]

    assert field in errors
    assert Gateway.objects.get(name="gw-1").url == URL


def test_patch_of_an_unknown_gateway_is_404(admin_api):
    assert_error(admin_api.patch("/api/v1/gateways/nope", {"enabled": False}, format="json"), 404)


def test_delete_answers_204_and_the_gateway_is_gone(admin_api):
    registered(admin_api)

    response = admin_api.delete("/api/v1/gateways/gw-1")

    assert response.status_code == 204
    assert_error(admin_api.get("/api/v1/gateways/gw-1"), 404)
    assert gateway_client().get("/api/v1/catalog").status_code == 401
    assert_error(admin_api.delete("/api/v1/gateways/gw-1"), 404)


# --- push now -------------------------------------------------------------------

def test_an_operator_can_push_now_and_gets_202_with_the_gateway(admin_api, operator_api):
    registered(admin_api)

    response = operator_api.post("/api/v1/gateways/gw-1/push")

    assert response.status_code == 202, response.content
    assert set(response.json()) == FIELDS and response.json()["name"] == "gw-1"
    assert AuditEvent.objects.filter(action="gateway.push", actor="operator-user", object_id="gw-1").exists()


def test_push_now_refuses_a_disabled_gateway_with_409(admin_api, operator_api):
    registered(admin_api, enabled=False)

    assert_error(operator_api.post("/api/v1/gateways/gw-1/push"), 409)


def test_push_now_of_an_unknown_gateway_is_404(operator_api):
    assert_error(operator_api.post("/api/v1/gateways/nope/push"), 404)


# --- roles ------------------------------------------------------------------------

WRITES = [
    ("post", "/api/v1/gateways", {"name": "gw-2", "url": URL, "token": OTHER_TOKEN}),
    ("patch", "/api/v1/gateways/gw-1", {"enabled": False}),
    ("delete", "/api/v1/gateways/gw-1", None),
    ("post", "/api/v1/gateways/gw-1/push", None),
]


def call(api, method: str, path: str, body):
    return getattr(api, method)(path, body, format="json") if body is not None else getattr(api, method)(path)


@pytest.mark.parametrize("method, path, body", WRITES)
def test_a_viewer_may_change_nothing(admin_api, viewer_api, method, path, body):
    registered(admin_api)

    assert_error(call(viewer_api, method, path, body), 403)
    assert list(Gateway.objects.values_list("name", "enabled")) == [("gw-1", True)]


@pytest.mark.parametrize("method, path, body", WRITES[:3])
def test_an_operator_may_push_but_not_register_change_or_remove(admin_api, operator_api, method, path, body):
    registered(admin_api)

    assert_error(call(operator_api, method, path, body), 403)
    assert list(Gateway.objects.values_list("name", "enabled")) == [("gw-1", True)]


@pytest.mark.parametrize("method, path, body", WRITES + [("get", "/api/v1/gateways", None),
                                                        ("get", "/api/v1/gateways/gw-1", None)])
def test_an_anonymous_call_is_401(admin_api, anonymous_api, method, path, body):
    registered(admin_api)

    assert_error(call(anonymous_api, method, path, body), 401)


# --- a gateway's own token ------------------------------------------------------

def test_a_gateway_token_pulls_the_catalog_and_marks_the_gateway_seen(admin_api):
    registered(admin_api)

    response = gateway_client().get("/api/v1/catalog")

    assert response.status_code == 200
    assert set(json.loads(response.content)) == {"version", "digest", "created_at", "settings_version", "models"}
    seen = admin_api.get("/api/v1/gateways/gw-1").json()
    assert seen["last_seen"] is not None and seen["state"] == "behind"


def test_a_disabled_gateway_token_cannot_pull(admin_api):
    registered(admin_api, enabled=False)

    assert_error(gateway_client().get("/api/v1/catalog"), 401)


@pytest.mark.parametrize("path", ["/api/v1/models", "/api/v1/models/llama", "/api/v1/gateways",
                                  "/api/v1/audit", "/api/v1/catalog/versions"])
def test_a_gateway_token_reads_nothing_but_the_catalog(admin_api, path):
    registered(admin_api)

    assert_error(gateway_client().get(path), 403)


@pytest.mark.parametrize("method, path, body", WRITES + [
    ("post", "/api/v1/models", {"name": "acme/x", "source": "hf://acme/x"}),
    ("patch", "/api/v1/models/declared-cpu", {"owner": "me"}),
    ("delete", "/api/v1/models/llama", None),
    ("post", "/api/v1/catalog", {}),
])
def test_a_gateway_token_on_any_write_is_403(admin_api, method, path, body):
    from catalog.models import StoredModel

    registered(admin_api)

    assert_error(call(gateway_client(), method, path, body), 403)
    assert list(Gateway.objects.values_list("name", "enabled")) == [("gw-1", True)]
    assert not StoredModel.objects.exists()
