"""/api/v1/models: list, add, get, replace, patch, resources, delete (SPEC §8)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from catalog import selectors
from catalog.models import AuditEvent, CatalogVersion, StoredModel

pytestmark = pytest.mark.django_db


SOURCE = "hf://acme/chat-7b"
# A name with every separator a name may have.
ODD = "acme/chat-7b:q4.k_m"


def model(name: str, **fields) -> dict:
    return {"name": name, "source": SOURCE, **fields}


def post(api, definition: dict):
    response = api.post("/api/v1/models", definition, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def assert_error(response, status: int) -> dict:
    assert response.status_code == status, getattr(response, "data", response.content)
    body = response.json()
    assert set(body) == {"detail", "errors"}
    assert isinstance(body["detail"], str) and body["detail"]
    assert all(isinstance(k, str) and isinstance(v, list) and all(isinstance(m, str) for m in v)
               for k, v in body["errors"].items())
    return body


# --- list ---------------------------------------------------------------------

def test_list_shows_every_model_in_force_with_kind_effective_class_and_warnings(viewer_api):
    response = viewer_api.get("/api/v1/models")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"count", "next", "previous", "results"}
    by_name = {m["name"]: m for m in body["results"]}
    assert set(by_name) == {"declared/llama", "declared-cpu"} and body["count"] == 2
    llama = by_name["declared/llama"]
    assert (llama["kind"], llama["effective_class"], llama["warnings"]) == ("declared", "critical", [])
    assert llama["aliases"] == ["llama"] and llama["engine"] == "vllm" and llama["scaling"] == {"min": 1, "max": 2}


def test_list_shows_a_warning_for_a_stored_cpu_only_profile_without_memory(viewer_api):
    StoredModel.objects.create(name="acme/cpu", definition='{"name": "acme/cpu", "source": "file:///m.gguf", '
                                                          '"profiles": [{"name": "cpu", "gpus": 0}]}')
    item = {m["name"]: m for m in viewer_api.get("/api/v1/models").json()["results"]}["acme/cpu"]
    assert item["kind"] == "runtime" and len(item["warnings"]) == 1 and "min_memory_gb" in item["warnings"][0]


@pytest.fixture
def assorted(operator_api):
    post(operator_api, model("acme/ops", owner="team:ops", engine="sglang", description="Runbook helper"))
    post(operator_api, model("acme/idle", scaling={"min": 0, "max": 1}, aliases=["sleepy"]))
    post(operator_api, model("acme/vip", **{"class": "critical"}, owner="team:ops"))


@pytest.mark.parametrize("query, expected", [
    ("kind=runtime", {"acme/ops", "acme/idle", "acme/vip"}),
    ("kind=declared", {"declared/llama", "declared-cpu"}),
    ("class=critical", {"declared/llama", "acme/vip"}),
    ("class=opportunistic", {"acme/idle"}),
    ("owner=team:ops", {"acme/ops", "acme/vip"}),
    ("engine=llama.cpp", {"declared-cpu"}),
    ("engine=sglang", {"acme/ops"}),
    ("q=SLEEPY", {"acme/idle"}),  # an alias
    ("q=runbook", {"acme/ops"}),  # a description
    ("q=declared", {"declared/llama", "declared-cpu"}),
    ("kind=runtime&owner=team:ops&class=standard", {"acme/ops"}),
    ("q=nothing-matches", set()),
])
def test_list_filters(assorted, viewer_api, query, expected):
    body = viewer_api.get(f"/api/v1/models?{query}").json()
    assert {m["name"] for m in body["results"]} == expected and body["count"] == len(expected)


def test_list_is_paginated_with_page_size(assorted, viewer_api):
    first = viewer_api.get("/api/v1/models?page_size=2").json()
    assert first["count"] == 5 and len(first["results"]) == 2 and first["previous"] is None
    assert parse_qs(urlparse(first["next"]).query) == {"page": ["2"], "page_size": ["2"]}
    second = viewer_api.get(first["next"]).json()
    third = viewer_api.get(second["next"]).json()
    assert third["next"] is None and second["previous"]
    names = [m["name"] for page in (first, second, third) for m in page["results"]]
    assert names == sorted(names) and len(set(names)) == 5


def test_a_page_past_the_end_is_404_in_the_error_shape(viewer_api):
    assert_error(viewer_api.get("/api/v1/models?page=9"), 404)


# --- add ----------------------------------------------------------------------

def test_post_adds_a_model_and_answers_201_with_it_as_built(operator_api):
    body = post(operator_api, model(ODD))
    assert body["name"] == ODD and body["kind"] == "runtime"
    assert body["engine"] == "vllm" and body["scaling"] == {"min": 1, "max": 2}
    assert body["profiles"][0]["name"] == "default" and body["effective_class"] == "standard"
    assert selectors.in_force().catalog.resolve(ODD) is not None


def test_post_of_a_declared_name_is_409_saying_where_to_edit(operator_api):
    body = assert_error(operator_api.post("/api/v1/models", model("declared/llama"), format="json"), 409)
    assert "declared" in body["detail"] and "settings" in body["detail"]


def test_post_puts_each_problem_on_its_field_path(operator_api):
    definition = model("acme/bad", fallbacks=["llama", "acme/ghost"],
                       profiles=[{"name": "cpu", "gpus": 0}], scaling={"min": 2, "max": 1}, colour="red")
    body = assert_error(operator_api.post("/api/v1/models", definition, format="json"), 400)
    assert {"fallbacks.1", "scaling.max", "colour"} <= set(body["errors"])
    assert "acme/ghost" in body["errors"]["fallbacks.1"][0]
    assert not StoredModel.objects.filter(name="acme/bad").exists()


def test_post_refuses_a_cpu_only_profile_without_memory_on_its_path(operator_api):
    definition = model("acme/cpu", profiles=[{"name": "cpu", "gpus": 0, "cpu_cores": 8}])
    body = assert_error(operator_api.post("/api/v1/models", definition, format="json"), 400)
    assert set(body["errors"]) == {"profiles.0.min_memory_gb"}


# --- get ----------------------------------------------------------------------

def test_get_by_a_name_with_slashes_and_colons(operator_api, viewer_api):
    post(operator_api, model(ODD))
    response = viewer_api.get(f"/api/v1/models/{ODD}")
    assert response.status_code == 200 and response.json()["name"] == ODD


def test_get_by_alias_answers_the_model_with_who_uses_it(operator_api, viewer_api):
    post(operator_api, model("acme/a", fallbacks=["llama"]))
    post(operator_api, model("acme/b", fallbacks=["acme/a", "declared/llama"]))
    post(operator_api, model("acme/c", canary={"model": "llama", "percent": 10}))
    body = viewer_api.get("/api/v1/models/llama").json()
    assert body["name"] == "declared/llama" and body["kind"] == "declared"
    assert body["used_by"] == {"fallback_of": ["acme/a", "acme/b"], "canary_of": ["acme/c"]}


def test_get_of_an_unknown_model_is_404(viewer_api):
    body = assert_error(viewer_api.get("/api/v1/models/acme/ghost"), 404)
    assert "acme/ghost" in body["detail"]


# --- put ----------------------------------------------------------------------

def test_put_replaces_the_whole_definition(operator_api):
    post(operator_api, model(ODD, owner="team:a", description="old", fallbacks=["llama"]))
    response = operator_api.put(f"/api/v1/models/{ODD}", {"source": "s3://weights/new", "description": "new"},
                                format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["name"], body["source"], body["description"], body["owner"], body["fallbacks"]) == (
        ODD, "s3://weights/new", "new", "", [])


def test_put_with_a_different_name_in_the_body_is_400_on_name(operator_api):
    post(operator_api, model("acme/a"))
    body = assert_error(operator_api.put("/api/v1/models/acme/a", model("acme/b"), format="json"), 400)
    assert set(body["errors"]) == {"name"}
    assert not StoredModel.objects.filter(name="acme/b").exists()


def test_put_of_an_unknown_model_is_404_and_adds_nothing(operator_api):
    assert_error(operator_api.put("/api/v1/models/acme/ghost", model("acme/ghost"), format="json"), 404)
    assert not StoredModel.objects.filter(name="acme/ghost").exists()


def test_put_of_a_declared_model_is_409(operator_api):
    assert_error(operator_api.put("/api/v1/models/declared/llama", model("declared/llama"), format="json"), 409)


def test_put_follows_adds_rules(operator_api):
    post(operator_api, model("acme/a"))
    body = assert_error(operator_api.put("/api/v1/models/acme/a", model("acme/a", source="hf://a/b/c"),
                                         format="json"), 400)
    assert set(body["errors"]) == {"source"}


# --- patch --------------------------------------------------------------------

def test_patch_changes_several_fields_in_one_rebuild(operator_api):
    post(operator_api, model("acme/small"))
    post(operator_api, model(ODD))
    versions = CatalogVersion.objects.count()
    changes = {"scaling": {"min": 0, "max": 4}, "class": "opportunistic", "owner": "org:acme",
               "fallbacks": ["acme/small", "llama"], "eval": {"suite": "mmlu", "min_score": 0.7},
               "canary": {"model": "acme/small", "percent": 20},
               "adapters": [{"name": "sql", "source": "s3://bucket/sql"}],
               "source": "s3://weights/chat", "origin": {"repo": "acme/chat", "revision": "v2"}}
    response = operator_api.patch(f"/api/v1/models/{ODD}", changes, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    for key in ("scaling", "class", "owner", "fallbacks", "eval", "canary", "adapters", "source"):
        assert body[key] == changes[key], key
    assert body["origin"]["revision"] == "v2"
    assert CatalogVersion.objects.count() == versions + 1
    assert AuditEvent.objects.filter(object_id=ODD, action="model.update").count() == 1


def test_patch_with_null_clears_canary_and_eval(operator_api):
    post(operator_api, model("acme/small"))
    post(operator_api, model("acme/a", canary={"model": "acme/small", "percent": 5},
                             eval={"suite": "mmlu", "min_score": 0.5}))
    body = operator_api.patch("/api/v1/models/acme/a", {"canary": None, "eval": None}, format="json").json()
    assert body["canary"] is None and body["eval"] is None


def test_patch_that_would_make_a_cycle_is_400_on_the_fallback(operator_api):
    post(operator_api, model("acme/a"))
    post(operator_api, model("acme/b", fallbacks=["acme/a"]))
    body = assert_error(operator_api.patch("/api/v1/models/acme/a", {"fallbacks": ["llama", "acme/b"]},
                                           format="json"), 400)
    assert "fallbacks.1" in body["errors"] and "cycle" in body["errors"]["fallbacks.1"][0]


def test_patch_of_a_field_it_cannot_change_is_400_on_that_field(operator_api):
    post(operator_api, model("acme/a"))
    body = assert_error(operator_api.patch("/api/v1/models/acme/a", {"aliases": ["x"]}, format="json"), 400)
    assert set(body["errors"]) == {"aliases"}


def test_patch_of_a_declared_model_is_409_and_of_an_unknown_one_404(operator_api):
    assert_error(operator_api.patch("/api/v1/models/declared/llama", {"owner": ""}, format="json"), 409)
    assert_error(operator_api.patch("/api/v1/models/acme/ghost", {"owner": ""}, format="json"), 404)


def test_patch_of_a_row_that_does_not_decode_is_409_saying_to_put_it_whole(operator_api):
    StoredModel.objects.create(name="acme/mangled", definition="{oops")
    body = assert_error(operator_api.patch("/api/v1/models/acme/mangled", {"owner": ""}, format="json"), 409)
    assert "PUT" in body["detail"]
    response = operator_api.put("/api/v1/models/acme/mangled", {"source": SOURCE}, format="json")
    assert response.status_code == 200 and response.json()["name"] == "acme/mangled"
    assert operator_api.get("/api/v1/skipped").json()["count"] == 0


# --- resources ----------------------------------------------------------------

def test_resources_sets_one_profile_of_a_model_with_slashes_and_colons(operator_api):
    post(operator_api, model(ODD, profiles=[{"name": "a", "gpus": 1}, {"name": "b", "gpus": 2}]))
    response = operator_api.post(f"/api/v1/models/{ODD}/-/resources",
                                 {"profile": "b", "min_memory_gb": 64, "cpu_cores": 16}, format="json")
    assert response.status_code == 200, response.json()
    a, b = response.json()["profiles"]
    assert (a["min_memory_gb"], b["min_memory_gb"], b["cpu_cores"]) == (0, 64, 16)


def test_resources_without_a_profile_sets_every_profile(operator_api):
    post(operator_api, model(ODD, profiles=[{"name": "a", "gpus": 1}, {"name": "b", "gpus": 2}]))
    body = operator_api.post(f"/api/v1/models/{ODD}/-/resources", {"min_memory_gb": 8, "cpu_cores": 2},
                             format="json").json()
    assert [(p["min_memory_gb"], p["cpu_cores"]) for p in body["profiles"]] == [(8, 2), (8, 2)]


@pytest.mark.parametrize("body, path", [
    ({"profile": "nope", "min_memory_gb": 8, "cpu_cores": 2}, "profile"),
    ({"min_memory_gb": -8, "cpu_cores": 2}, "min_memory_gb"),
    ({"min_memory_gb": 8}, "cpu_cores"),
    ({"profile": 3, "min_memory_gb": 8, "cpu_cores": 2}, "profile"),
])
def test_resources_refusals_are_400_on_their_field(operator_api, body, path):
    post(operator_api, model("acme/a"))
    error = assert_error(operator_api.post("/api/v1/models/acme/a/-/resources", body, format="json"), 400)
    assert set(error["errors"]) == {path}


def test_resources_of_a_declared_model_is_409(operator_api):
    assert_error(operator_api.post("/api/v1/models/declared-cpu/-/resources",
                                   {"min_memory_gb": 8, "cpu_cores": 2}, format="json"), 409)


# --- delete -------------------------------------------------------------------

def test_delete_removes_a_model_and_answers_204(operator_api, viewer_api):
    post(operator_api, model(ODD))
    response = operator_api.delete(f"/api/v1/models/{ODD}")
    assert response.status_code == 204 and not response.content
    assert_error(viewer_api.get(f"/api/v1/models/{ODD}"), 404)


def test_delete_of_a_declared_model_is_409(operator_api):
    body = assert_error(operator_api.delete("/api/v1/models/declared/llama"), 409)
    assert "settings" in body["detail"]


def test_delete_of_a_model_others_fall_back_to_is_409_naming_them(operator_api):
    post(operator_api, model("acme/a"))
    post(operator_api, model("acme/b", fallbacks=["acme/a"]))
    body = assert_error(operator_api.delete("/api/v1/models/acme/a"), 409)
    assert "acme/b" in body["detail"]


def test_delete_of_an_unknown_model_is_404(operator_api):
    assert_error(operator_api.delete("/api/v1/models/acme/ghost"), 404)


def test_delete_by_alias_is_refused_naming_the_model(operator_api):
    post(operator_api, model("acme/a", aliases=["short"]))
    response = operator_api.delete("/api/v1/models/short")
    body = assert_error(response, response.status_code)
    assert response.status_code in (404, 409) and "acme/a" in body["detail"]
    assert StoredModel.objects.filter(name="acme/a").exists()
