"""/api/v1 skipped, sources, catalog (ETag), catalog versions with diffs,
audit and health (SPEC §5, §8)."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from catalog import selectors
from catalog.models import AuditEvent, CatalogVersion, StoredModel

pytestmark = pytest.mark.django_db


SOURCE = "hf://acme/chat-7b"


def model(name: str, **fields) -> dict:
    return {"name": name, "source": SOURCE, **fields}


def post(api, definition: dict) -> dict:
    response = api.post("/api/v1/models", definition, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def assert_error(response, status: int) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"detail", "errors"} and isinstance(body["detail"], str)
    return body


def canonical_digest(models: list) -> str:
    body = json.dumps(models, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return "sha256:" + hashlib.sha256(body).hexdigest()


# --- skipped and sources ------------------------------------------------------

def test_skipped_lists_the_rows_left_out_with_their_reasons(viewer_api):
    StoredModel.objects.create(name="acme/orphan", definition=json.dumps(model("acme/orphan", fallbacks=["gone"])))
    StoredModel.objects.create(name="acme/mangled", definition="not json at all")
    body = viewer_api.get("/api/v1/skipped").json()
    assert body["count"] == 2
    reasons = {row["name"]: row for row in body["results"]}
    assert set(reasons["acme/orphan"]) == {"name", "kind", "reason"}
    assert "gone" in reasons["acme/orphan"]["reason"] and "JSON" in reasons["acme/mangled"]["reason"]


def test_skipped_is_empty_when_every_row_loads(operator_api, viewer_api):
    post(operator_api, model("acme/a"))
    assert viewer_api.get("/api/v1/skipped").json() == {"count": 0, "next": None, "previous": None, "results": []}


def test_sources_maps_each_weights_uri_to_the_models_that_load_it(operator_api, viewer_api):
    post(operator_api, model("acme/a", adapters=[{"name": "sql", "source": "s3://bucket/sql"}]))
    post(operator_api, model("acme/b", adapters=[{"name": "sql", "source": "s3://bucket/sql"}]))
    body = viewer_api.get("/api/v1/sources?page_size=100").json()
    sources = {row["source"]: row["models"] for row in body["results"]}
    assert sources[SOURCE] == ["acme/a", "acme/b"]
    assert sources["s3://bucket/sql"] == ["acme/a", "acme/b"]
    assert sources["file:///models/phi.gguf"] == ["declared-cpu"]
    assert body["count"] == len(sources) == 4


# --- catalog ------------------------------------------------------------------

def test_catalog_is_the_document_in_force_with_its_digest_as_etag(operator_api, viewer_api):
    post(operator_api, model("acme/a", eval={"suite": "mmlu", "min_score": 0.8}, description="naïve ✓"))
    response = viewer_api.get("/api/v1/catalog")
    assert response.status_code == 200 and response["Content-Type"].startswith("application/json")
    document = json.loads(response.content)
    assert set(document) == {"version", "digest", "created_at", "settings_version", "models"}
    assert response["ETag"] == f'"{document["digest"]}"'
    assert document["digest"] == canonical_digest(document["models"])
    assert document["digest"] == selectors.in_force().catalog.digest
    latest = CatalogVersion.objects.order_by("-version").first()
    assert (document["version"], document["settings_version"]) == (latest.version, 1)
    assert [m["name"] for m in document["models"]] == ["acme/a", "declared-cpu", "declared/llama"]


def test_catalog_answers_304_with_no_body_when_the_etag_matches(viewer_api):
    etag = viewer_api.get("/api/v1/catalog")["ETag"]
    response = viewer_api.get("/api/v1/catalog", HTTP_IF_NONE_MATCH=etag)
    assert response.status_code == 304 and response.content == b""
    assert response["ETag"] == etag


def test_catalog_answers_the_new_document_once_the_catalog_changed(operator_api, viewer_api):
    etag = viewer_api.get("/api/v1/catalog")["ETag"]
    post(operator_api, model("acme/a"))
    response = viewer_api.get("/api/v1/catalog", HTTP_IF_NONE_MATCH=etag)
    assert response.status_code == 200 and response["ETag"] != etag
    assert "acme/a" in {m["name"] for m in json.loads(response.content)["models"]}


def test_catalog_versions_are_listed_newest_first(operator_api, viewer_api):
    post(operator_api, model("acme/a"))
    post(operator_api, model("acme/b"))
    body = viewer_api.get("/api/v1/catalog/versions").json()
    assert set(body) == {"count", "next", "previous", "results"} and body["count"] == 3
    assert [v["version"] for v in body["results"]] == [3, 2, 1]
    assert set(body["results"][0]) == {"version", "digest", "created_at", "created_by", "reason",
                                       "settings_version"}
    assert body["results"][0]["created_by"] == "operator-user"


def test_a_catalog_version_has_its_models_and_a_diff_against_another(operator_api, viewer_api):
    post(operator_api, model("acme/a"))
    post(operator_api, model("acme/b"))
    operator_api.patch("/api/v1/models/acme/a", {"owner": "team:x"}, format="json")
    operator_api.delete("/api/v1/models/acme/b")
    latest = CatalogVersion.objects.order_by("-version").first().version
    response = viewer_api.get(f"/api/v1/catalog/versions/{latest}?diff=2")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["version"] == latest and [m["name"] for m in body["models"]] == [
        "acme/a", "declared-cpu", "declared/llama"]
    assert body["diff"] == {"base": 2, "added": [], "removed": [],
                            "changed": [{"name": "acme/a", "fields": ["owner"]}]}
    backwards = viewer_api.get(f"/api/v1/catalog/versions/1?diff={latest - 1}").json()["diff"]
    assert backwards["removed"] == ["acme/a", "acme/b"] and backwards["added"] == []


def test_an_unknown_catalog_version_is_404_and_a_bad_diff_400(viewer_api):
    viewer_api.get("/api/v1/catalog")
    assert_error(viewer_api.get("/api/v1/catalog/versions/99"), 404)
    assert_error(viewer_api.get("/api/v1/catalog/versions/1?diff=99"), 404)
    assert set(assert_error(viewer_api.get("/api/v1/catalog/versions/1?diff=two"), 400)["errors"]) == {"diff"}


# --- audit --------------------------------------------------------------------

def test_audit_lists_who_changed_what_with_before_and_after(operator_api, viewer_api):
    post(operator_api, model("acme/a"))
    operator_api.patch("/api/v1/models/acme/a", {"owner": "team:x"}, format="json")
    body = viewer_api.get("/api/v1/audit?object=acme/a").json()
    assert body["count"] == 2
    newest, oldest = body["results"]
    assert (newest["actor"], newest["action"], newest["object_type"], newest["object_id"]) == (
        "operator-user", "model.update", "model", "acme/a")
    assert newest["before"].get("owner", "") == "" and newest["after"]["owner"] == "team:x"
    assert oldest["action"] == "model.add" and oldest["before"] is None
    assert newest["request_id"]


def test_audit_filters_by_actor_and_since(operator_api, admin_api, viewer_api):
    post(operator_api, model("acme/a"))
    post(admin_api, model("acme/b"))
    admins = viewer_api.get("/api/v1/audit?actor=admin-user").json()["results"]
    assert [e["object_id"] for e in admins if e["object_type"] == "model"] == ["acme/b"]
    assert all(e["actor"] == "admin-user" for e in admins)
    AuditEvent.objects.filter(object_id="acme/a").update(at=timezone.now() - timedelta(days=2))
    since = (timezone.now() - timedelta(days=1)).isoformat()
    recent = viewer_api.get("/api/v1/audit", {"since": since, "page_size": 1000}).json()["results"]
    assert "acme/b" in {e["object_id"] for e in recent} and "acme/a" not in {e["object_id"] for e in recent}


def test_audit_refuses_a_since_that_is_not_a_time(viewer_api):
    body = assert_error(viewer_api.get("/api/v1/audit?since=yesterday"), 400)
    assert set(body["errors"]) == {"since"}


# --- health -------------------------------------------------------------------

def test_health_answers_without_a_token_with_the_database_state(anonymous_api):
    response = anonymous_api.get("/api/v1/health")
    assert response.status_code == 200
    body = response.json()
    assert body["database"] == "ok" and body["status"] == "ok" and "broker" in body
