"""Gateways pulling the catalog: ``GET /api/v1/catalog`` with their token,
``ETag`` / ``If-None-Match``, and the long poll ``?after=N&wait=S``
(SPEC §5)."""

from __future__ import annotations

import json
import threading
import time

import pytest
from django.db import connection
from rest_framework.test import APIClient

from catalog import selectors
from catalog.services.gateways import register_gateway

pytestmark = pytest.mark.django_db

TOKEN = "tok-puller-0123456789abcdef"
DOCUMENT_FIELDS = {"version", "digest", "created_at", "settings_version", "models"}


@pytest.fixture
def gateway_api(db):
    register_gateway(name="puller", url="http://puller.example:8080", token=TOKEN, by="tests")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    return client


def pull(api, *, etag: str | None = None, **query):
    headers = {"HTTP_IF_NONE_MATCH": etag} if etag else {}
    return api.get("/api/v1/catalog", query, **headers)


def timed(call):
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


def assert_error(response, status: int) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"detail", "errors"}
    return body


# --- ETag -------------------------------------------------------------------------

def test_a_gateway_pulls_the_catalog_with_its_digest_as_etag(gateway_api):
    response = pull(gateway_api)

    assert response.status_code == 200
    document = json.loads(response.content)
    latest = selectors.latest_catalog_version()
    assert set(document) == DOCUMENT_FIELDS
    assert (document["version"], document["digest"]) == (latest.version, latest.digest)
    assert response["ETag"] == f'"{latest.digest}"'
    assert response["X-Llmgw-Catalog-Version"] == str(latest.version)
    assert response.content == selectors.catalog_document_bytes(latest)


@pytest.mark.parametrize("header", ['{etag}', 'W/{etag}', '"sha256:other", {etag}', '*'])
def test_a_pull_with_the_current_etag_is_answered_304_without_a_body(gateway_api, header):
    etag = pull(gateway_api)["ETag"]

    response = pull(gateway_api, etag=header.format(etag=etag))

    assert response.status_code == 304 and response.content == b""
    assert response["ETag"] == etag


def test_a_pull_with_an_old_etag_gets_the_new_catalog(gateway_api, operator_api):
    old = pull(gateway_api)["ETag"]
    assert operator_api.post("/api/v1/models", {"name": "acme/new", "source": "hf://acme/new"},
                             format="json").status_code == 201

    response = pull(gateway_api, etag=old)

    assert response.status_code == 200 and response["ETag"] != old
    assert "acme/new" in [m["name"] for m in json.loads(response.content)["models"]]


def test_a_user_token_pulls_the_same_way(viewer_api):
    etag = pull(viewer_api)["ETag"]

    assert pull(viewer_api, etag=etag).status_code == 304


# --- long poll ----------------------------------------------------------------------

def test_a_long_poll_answers_at_once_when_a_newer_version_exists(gateway_api):
    latest = json.loads(pull(gateway_api).content)["version"]

    response, took = timed(lambda: pull(gateway_api, after=latest - 1, wait=60))

    assert response.status_code == 200
    assert json.loads(response.content)["version"] == latest
    assert took < 30  # it did not sit out the wait


def test_a_long_poll_with_nothing_newer_waits_then_answers_304_for_the_current_etag(gateway_api):
    first = pull(gateway_api)
    latest = json.loads(first.content)["version"]

    response, took = timed(lambda: pull(gateway_api, etag=first["ETag"], after=latest, wait=1))

    assert response.status_code == 304 and response["X-Llmgw-Catalog-Version"] == str(latest)
    assert took >= 1


def test_a_long_poll_with_nothing_newer_and_no_etag_answers_the_same_version(gateway_api):
    latest = json.loads(pull(gateway_api).content)["version"]

    response, took = timed(lambda: pull(gateway_api, after=latest, wait=1))

    assert response.status_code == 200 and json.loads(response.content)["version"] == latest
    assert took >= 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_long_poll_answers_as_soon_as_a_newer_version_is_recorded(gateway_api):
    from catalog.services.models import add_model

    first = pull(gateway_api)
    latest = json.loads(first.content)["version"]
    errors = []

    def write_soon():
        try:
            time.sleep(0.5)
            add_model(definition={"name": "acme/late", "source": "hf://acme/late"}, by="tests")
        except Exception as exc:  # reported by the test, not lost in the thread
            errors.append(exc)
        finally:
            connection.close()

    writer = threading.Thread(target=write_soon)
    writer.start()
    try:
        response, took = timed(lambda: pull(gateway_api, etag=first["ETag"], after=latest, wait=30))
    finally:
        writer.join(timeout=30)

    assert not errors
    assert response.status_code == 200
    document = json.loads(response.content)
    assert document["version"] == latest + 1
    assert "acme/late" in [m["name"] for m in document["models"]]
    assert took < 20  # answered when the version came, not at the end of the wait


@pytest.mark.parametrize("query, field", [
    ({"after": 1, "wait": 61}, "wait"),
    ({"after": 1, "wait": -1}, "wait"),
    ({"after": "abc", "wait": 2}, "after"),
    ({"after": "1.5"}, "after"),
    ({"after": -3, "wait": 1}, "after"),
])
def test_a_long_poll_refuses_bad_numbers_with_400_naming_the_parameter(gateway_api, query, field):
    body = assert_error(pull(gateway_api, **query), 400)

    assert list(body["errors"]) == [field]
