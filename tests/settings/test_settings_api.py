"""``/api/v1/settings...`` (SPEC §8, issue #3): the layered view, writes
that name their base version, 400 with the field path for bad input (never
500), 409 for a stale base, keys, history with diffs, rollback, a bad newest
version that does not keep the console down, the file-change warning,
secrets that never come back, and the roles."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from catalog.builder.settings import SECRET_MASK
from catalog.models import AuditEvent, CatalogVersion, SettingsVersion
from catalog.services import models as model_services

pytestmark = pytest.mark.django_db

SETTINGS = "/api/v1/settings"
TOKEN = "peer-secret-9d41e0b7"


def errors_of(response) -> dict:
    """The one error shape (SPEC §8), checked, and its field errors."""
    body = response.json()
    assert set(body) == {"detail", "errors"} and isinstance(body["detail"], str) and body["detail"], body
    return body["errors"]


def show(api) -> dict:
    response = api.get(SETTINGS)
    assert response.status_code == 200, response.content
    return response.json()


def stored(number: int | None = None) -> dict:
    query = SettingsVersion.objects.order_by("-number")
    return (query.get(number=number) if number else query.first()).document


def counts() -> tuple[int, int, int]:
    return SettingsVersion.objects.count(), CatalogVersion.objects.count(), AuditEvent.objects.count()


def put(api, document, base, **body):
    return api.put(SETTINGS, {"document": document, "base_version": base, **body}, format="json")


@pytest.fixture
def v1(admin_api) -> dict:
    """The imported document (version 1), as a copy to edit."""
    assert show(admin_api)["version"] == 1
    return copy.deepcopy(stored(1))


@pytest.fixture
def original(settings_file) -> dict:
    return yaml.safe_load(settings_file.path.read_text())


# --- the layered view ---------------------------------------------------------

def test_get_settings_shows_the_version_in_force_its_document_and_layers(viewer_api, original):
    body = show(viewer_api)
    assert body["version"] == 1 and body["warnings"] == []
    assert body["document"]["cluster_name"] == "test" and body["document"]["guard"] == {"policy": "baseline"}
    layers = {(layer["key"], layer["source"]): layer for layer in body["layers"]}
    assert layers[("guard", "store")] == {"key": "guard", "value": {"policy": "baseline"}, "source": "store",
                                          "ignored": False}
    assert layers[("listen", "file")] == {"key": "listen", "value": original["listen"], "source": "file",
                                          "ignored": False}
    assert ("listen", "store") not in layers


def test_an_invalid_settings_file_answers_503_in_the_error_shape_not_500(admin_api, settings_file, original):
    settings_file.write({**original, "defaults": {"engine": "tgi"}})
    response = admin_api.get(SETTINGS)
    assert response.status_code == 503
    errors_of(response)
    assert "defaults.engine" in response.json()["detail"]
    assert not SettingsVersion.objects.exists()
    assert admin_api.get("/api/v1/models").status_code == 503


def test_a_missing_settings_file_imports_empty_settings(admin_api, settings_file):
    settings_file.path.unlink()
    body = show(admin_api)
    assert body["version"] == 1 and body["document"] == {"guard": {"policy": "baseline"}}
    assert admin_api.get("/api/v1/models").json()["count"] == 0


# --- compare-and-set ----------------------------------------------------------

def test_a_write_based_on_an_old_version_is_409_and_stores_nothing(admin_api, v1):
    assert put(admin_api, {**v1, "guard": {"policy": "strict"}}, 1).status_code == 200
    before = counts()
    response = put(admin_api, {**v1, "cluster_name": "other"}, 1)
    assert response.status_code == 409
    assert "2" in response.json()["detail"] and errors_of(response) == {}
    assert counts() == before and stored()["cluster_name"] == "test"


def test_a_write_without_base_version_is_400_on_base_version(admin_api, v1):
    response = admin_api.put(SETTINGS, {"document": v1}, format="json")
    assert response.status_code == 400
    assert "base_version" in errors_of(response)
    assert SettingsVersion.objects.count() == 1


def test_a_write_may_name_its_base_version_in_if_match(admin_api, v1):
    response = admin_api.put(SETTINGS, {"document": {**v1, "guard": {"policy": "strict"}}}, format="json",
                             HTTP_IF_MATCH='"1"')
    assert response.status_code == 200, response.content
    assert response.json()["version"] == 2


def test_a_stale_if_match_is_409(admin_api, v1):
    put(admin_api, {**v1, "guard": {"policy": "strict"}}, 1)
    response = admin_api.put(SETTINGS, {"document": v1}, format="json", HTTP_IF_MATCH='"1"')
    assert response.status_code == 409


def test_a_base_version_that_is_not_a_number_is_400_on_base_version(admin_api, v1):
    response = admin_api.delete(f"{SETTINGS}/keys/guard?base_version=latest")
    assert response.status_code == 400 and "base_version" in errors_of(response)


def test_delete_takes_its_base_version_from_the_query_string(admin_api, v1):
    response = admin_api.delete(f"{SETTINGS}/keys/defaults.scaling.max?base_version=1")
    assert response.status_code == 200, response.content
    assert stored(2)["defaults"]["scaling"] == {"min": 1}


def test_delete_takes_its_base_version_from_if_match(admin_api, v1):
    response = admin_api.delete(f"{SETTINGS}/keys/cluster_name", HTTP_IF_MATCH='"1"')
    assert response.status_code == 200, response.content
    assert "cluster_name" not in stored(2)


def test_delete_without_a_base_version_is_400(admin_api, v1):
    response = admin_api.delete(f"{SETTINGS}/keys/cluster_name")
    assert response.status_code == 400 and "base_version" in errors_of(response)
    assert SettingsVersion.objects.count() == 1


def test_delete_based_on_an_old_version_is_409(admin_api, v1):
    put(admin_api, {**v1, "guard": {"policy": "strict"}}, 1)
    response = admin_api.delete(f"{SETTINGS}/keys/cluster_name?base_version=1")
    assert response.status_code == 409 and SettingsVersion.objects.count() == 2


# --- validation: 400 with the path, never 500 ---------------------------------

def test_bad_yaml_text_is_400_on_document(admin_api, v1):
    response = put(admin_api, "cluster_name: test\nengines: [vllm\n", 1)
    assert response.status_code == 400
    assert set(errors_of(response)) == {"document"}


@pytest.mark.parametrize("document", ["- just\n- a list\n", 7, None, ["a"]])
def test_a_document_that_is_not_a_mapping_is_400_on_document(admin_api, v1, document):
    response = put(admin_api, document, 1)
    assert response.status_code == 400
    assert set(errors_of(response)) == {"document"}


def test_a_yaml_text_document_is_accepted(admin_api, v1):
    response = put(admin_api, yaml.safe_dump({**v1, "guard": {"policy": "strict"}}), 1)
    assert response.status_code == 200, response.content
    assert stored(2)["guard"] == {"policy": "strict"}


@pytest.mark.parametrize("change,path", [
    ({"engines": "vllm"}, "engines"),
    ({"defaults": {"engine": "vllm", "scaling": {"min": 1, "max": "two"}}}, "defaults.scaling.max"),
    ({"defaults": {"engine": "tgi"}}, "defaults.engine"),
    ({"models": {"name": "x"}}, "models"),
    ({"federation": {"offer": "some"}}, "federation.offer"),
    ({"federation": {"peers": [{"name": "test", "url": "https://east.example", "token": "t"}]}},
     "federation.peers.0.name"),
    ({"guard": {"policy": "lenient"}}, "guard.policy"),
    ({"listen": "0.0.0.0:80"}, "listen"),
    ({"colour": "blue"}, "colour"),
])
def test_a_wrong_value_is_400_with_its_dotted_path(admin_api, v1, change, path):
    response = put(admin_api, {**v1, **change}, 1)
    assert response.status_code == 400
    assert path in errors_of(response)
    assert SettingsVersion.objects.count() == 1


def test_a_machine_key_is_refused_saying_it_belongs_in_the_machine_file(admin_api, v1):
    response = put(admin_api, {**v1, "log": {"level": "debug"}}, 1)
    assert response.status_code == 400
    assert "machine" in " ".join(errors_of(response)["log"])


def test_a_declared_model_that_does_not_build_is_400_at_its_place_under_models(admin_api, v1):
    v1["models"][1]["profiles"][0]["cpu_cores"] = -2
    response = put(admin_api, v1, 1)
    assert response.status_code == 400
    assert set(errors_of(response)) == {"models.1.profiles.0.cpu_cores"}


def test_a_declared_model_taking_a_runtime_models_name_is_not_an_error_but_skips_it(admin_api, v1):
    model_services.add_model(definition={"name": "acme/chat", "source": "hf://acme/chat-7b"}, by="olga")
    v1["models"].append({"name": "acme/chat", "source": "hf://acme/chat-13b"})
    response = put(admin_api, v1, 1)
    assert response.status_code == 200, response.content
    skipped = response.json()["impact"]["skipped"]
    assert [(s["name"], s["kind"]) for s in skipped] == [("acme/chat", "runtime")] and skipped[0]["reason"]
    assert admin_api.get("/api/v1/models/acme/chat").json()["kind"] == "declared"


# --- the impact ---------------------------------------------------------------

def test_put_settings_answers_the_new_version_and_its_impact(admin_api, v1):
    model_services.add_model(definition={"name": "acme/chat", "source": "hf://acme/chat-7b",
                                         "fallbacks": ["declared-cpu"]}, by="olga")
    v1["models"] = [v1["models"][0], {"name": "declared/qwen", "source": "hf://qwen/Qwen2.5-7B"}]
    v1["models"][0]["owner"] = "team:search"
    response = put(admin_api, v1, 1, comment="swap the cpu model")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["version"] == 2 and body["document"] == v1
    impact = body["impact"]
    assert impact["added"] == ["declared/qwen"]
    assert impact["removed"] == ["acme/chat", "declared-cpu"]
    assert impact["changed"] == [{"name": "declared/llama", "fields": ["owner"]}]
    assert [s["name"] for s in impact["skipped"]] == ["acme/chat"] and "declared-cpu" in impact["skipped"][0]["reason"]
    assert impact["restored"] == []
    version = SettingsVersion.objects.get(number=2)
    assert (version.author, version.comment, version.parent) == ("admin-user", "swap the cpu model", 1)


def test_a_rollback_answers_the_models_it_restores(admin_api, v1):
    model_services.add_model(definition={"name": "acme/chat", "source": "hf://acme/chat-7b",
                                         "fallbacks": ["declared-cpu"]}, by="olga")
    put(admin_api, {**v1, "models": v1["models"][:1]}, 1)
    response = admin_api.post(f"{SETTINGS}/rollback", {"version": 1, "base_version": 2}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["impact"]["restored"] == ["acme/chat"]


def test_a_write_that_changes_the_catalog_records_a_catalog_version(admin_api, v1):
    v1["defaults"]["scaling"]["max"] = 5
    put(admin_api, v1, 1)
    catalog = admin_api.get("/api/v1/catalog").json()
    assert (catalog["version"], catalog["settings_version"]) == (2, 2)
    assert AuditEvent.objects.filter(action="settings.replace", actor="admin-user", object_id="2").count() == 1


def test_a_write_that_leaves_the_catalog_alone_records_no_catalog_version(admin_api, v1):
    put(admin_api, {**v1, "guard": {"policy": "strict"}}, 1)
    assert CatalogVersion.objects.count() == 1
    assert admin_api.get("/api/v1/catalog").json()["version"] == 1


# --- preview ------------------------------------------------------------------

def test_preview_stores_nothing(admin_api, v1):
    before = counts()
    response = admin_api.post(f"{SETTINGS}/preview", {"document": {**v1, "models": []}, "base_version": 1},
                              format="json")
    assert response.status_code == 200, response.content
    assert response.json()["version"] is None
    assert response.json()["impact"]["removed"] == ["declared-cpu", "declared/llama"]
    assert counts() == before
    assert show(admin_api)["version"] == 1
    assert admin_api.get("/api/v1/models").json()["count"] == 2


def test_preview_reports_the_impact_the_write_then_reports(admin_api, v1):
    model_services.add_model(definition={"name": "acme/chat", "source": "hf://acme/chat-7b",
                                         "fallbacks": ["llama"]}, by="olga")
    v1["models"] = v1["models"][1:]
    v1["defaults"]["scaling"] = {"min": 0, "max": 4}
    body = {"document": v1, "base_version": 1}
    previewed = admin_api.post(f"{SETTINGS}/preview", body, format="json").json()["impact"]
    written = admin_api.put(SETTINGS, body, format="json").json()["impact"]
    assert previewed == written
    assert previewed["removed"] and previewed["changed"] and previewed["skipped"]


def test_preview_of_an_invalid_document_is_400_with_the_path(admin_api, v1):
    v1["models"][0]["scaling"] = {"min": 3, "max": 1}
    response = admin_api.post(f"{SETTINGS}/preview", {"document": v1, "base_version": 1}, format="json")
    assert response.status_code == 400
    assert "models.0.scaling.max" in errors_of(response)


# --- keys -----------------------------------------------------------------------

def test_get_key_reads_a_nested_key(viewer_api):
    response = viewer_api.get(f"{SETTINGS}/keys/defaults.scaling.max")
    assert response.status_code == 200
    assert response.json() == {"key": "defaults.scaling.max", "value": 2, "version": 1}


def test_get_key_reads_a_list_item_by_index(viewer_api):
    assert viewer_api.get(f"{SETTINGS}/keys/models.1.name").json()["value"] == "declared-cpu"


@pytest.mark.parametrize("key", ["defaults.scaling.step", "models.7", "nothing", "cluster_name.x"])
def test_get_of_a_key_that_is_not_set_is_404_in_the_error_shape(viewer_api, key):
    response = viewer_api.get(f"{SETTINGS}/keys/{key}")
    assert response.status_code == 404
    errors_of(response)


def test_put_key_creates_the_missing_mappings(admin_api, v1):
    response = admin_api.put(f"{SETTINGS}/keys/federation.offer", {"value": ["llama"], "base_version": 1},
                             format="json")
    assert response.status_code == 200, response.content
    assert response.json()["version"] == 2
    assert stored(2)["federation"] == {"offer": ["llama"]}
    assert admin_api.get(f"{SETTINGS}/keys/federation.offer").json() == {
        "key": "federation.offer", "value": ["llama"], "version": 2}


def test_put_key_with_a_wrong_value_is_400_on_the_key(admin_api, v1):
    response = admin_api.put(f"{SETTINGS}/keys/defaults.engine", {"value": "tgi", "base_version": 1},
                             format="json")
    assert response.status_code == 400 and "defaults.engine" in errors_of(response)


def test_put_key_without_a_value_is_400_on_value(admin_api, v1):
    response = admin_api.put(f"{SETTINGS}/keys/guard.policy", {"base_version": 1}, format="json")
    assert response.status_code == 400 and "value" in errors_of(response)


def test_delete_key_removes_it(admin_api, v1):
    response = admin_api.delete(f"{SETTINGS}/keys/defaults.scaling?base_version=1")
    assert response.status_code == 200, response.content
    assert stored(2)["defaults"] == {"engine": "vllm"}
    assert admin_api.get(f"{SETTINGS}/keys/defaults.scaling").status_code == 404


def test_delete_of_a_key_that_is_not_set_is_404_and_stores_nothing(admin_api, v1):
    response = admin_api.delete(f"{SETTINGS}/keys/federation.peers?base_version=1")
    assert response.status_code == 404
    errors_of(response)
    assert SettingsVersion.objects.count() == 1


# --- history and rollback -----------------------------------------------------

def make_history(api, v1) -> None:
    """Versions 2..4 on top of the import."""
    for n, policy in enumerate(["strict", "permissive", "baseline"], start=1):
        assert put(api, {**v1, "guard": {"policy": policy}}, n).status_code == 200


def test_versions_are_listed_newest_first_and_paginated(admin_api, v1):
    make_history(admin_api, v1)
    first = admin_api.get(f"{SETTINGS}/versions?page_size=3").json()
    assert first["count"] == 4 and first["previous"] is None and first["next"]
    assert [v["number"] for v in first["results"]] == [4, 3, 2]
    assert first["results"][0]["author"] == "admin-user" and first["results"][0]["parent"] == 3
    second = admin_api.get(first["next"]).json()
    assert [v["number"] for v in second["results"]] == [1] and second["results"][0]["author"] == "system"


def test_a_version_shows_its_document(viewer_api, admin_api, v1):
    make_history(admin_api, v1)
    body = viewer_api.get(f"{SETTINGS}/versions/2").json()
    assert body["number"] == 2 and body["document"] == {**v1, "guard": {"policy": "strict"}}
    assert "diff" not in body


def test_a_version_diff_names_the_changed_keys_and_models_by_name(admin_api, v1):
    changed = copy.deepcopy(v1)
    changed["models"].reverse()  # moving a model is not a change
    changed["models"][1]["class"] = "standard"  # declared/llama
    changed["defaults"]["scaling"]["max"] = 3
    del changed["cluster_name"]
    put(admin_api, changed, 1)
    body = admin_api.get(f"{SETTINGS}/versions/2?diff=1").json()
    assert body["diff"]["base"] == 1
    assert body["diff"]["changes"] == [
        {"key": "cluster_name", "change": "removed", "before": "test", "after": None},
        {"key": "defaults.scaling.max", "change": "changed", "before": 2, "after": 3},
        {"key": "models[declared/llama].class", "change": "changed", "before": "critical", "after": "standard"},
    ]


def test_a_diff_with_an_unknown_version_is_404(viewer_api):
    response = viewer_api.get(f"{SETTINGS}/versions/1?diff=9")
    assert response.status_code == 404
    errors_of(response)


def test_an_unknown_version_is_404(viewer_api):
    response = viewer_api.get(f"{SETTINGS}/versions/9")
    assert response.status_code == 404
    errors_of(response)


def test_rollback_creates_a_new_higher_version_with_the_old_content_exactly(admin_api, v1):
    make_history(admin_api, v1)
    response = admin_api.post(f"{SETTINGS}/rollback", {"version": 2, "base_version": 4, "comment": "back"},
                              format="json")
    assert response.status_code == 200, response.content
    assert response.json()["version"] == 5
    assert stored(5) == stored(2)
    body = show(admin_api)
    assert body["version"] == 5 and body["document"]["guard"] == {"policy": "strict"}
    assert admin_api.get(f"{SETTINGS}/versions/5?diff=2").json()["diff"]["changes"] == []


def test_rollback_of_an_unknown_version_is_404_and_stores_nothing(admin_api, v1):
    response = admin_api.post(f"{SETTINGS}/rollback", {"version": 9, "base_version": 1}, format="json")
    assert response.status_code == 404
    errors_of(response)
    assert SettingsVersion.objects.count() == 1


def test_rollback_based_on_an_old_version_is_409(admin_api, v1):
    make_history(admin_api, v1)
    response = admin_api.post(f"{SETTINGS}/rollback", {"version": 1, "base_version": 3}, format="json")
    assert response.status_code == 409 and SettingsVersion.objects.count() == 4


# --- a newest version that does not load --------------------------------------

def write_directly(document, number: int) -> None:
    SettingsVersion.objects.create(number=number, document=document, author="mallory", comment="by hand",
                                   parent=number - 1)


@pytest.mark.parametrize("bad,why", [
    ({"engines": 7}, "engines"),
    ({"models": [{"name": "declared/x", "engine": "tgi", "source": "hf://x/y"}]}, "tgi"),
])
def test_a_newest_version_that_does_not_load_leaves_the_previous_one_in_force(viewer_api, v1, bad, why):
    write_directly({**v1, **bad}, 2)
    body = show(viewer_api)
    assert body["version"] == 1 and body["document"] == v1
    [warning] = body["warnings"]
    assert "version 2" in warning and why in warning
    models = viewer_api.get("/api/v1/models")
    assert models.status_code == 200 and models.json()["count"] == 2


def test_a_write_based_on_the_bad_newest_version_repairs_it(admin_api, v1):
    write_directly({**v1, "engines": 7}, 2)
    response = put(admin_api, {**v1, "guard": {"policy": "strict"}}, 2)
    assert response.status_code == 200, response.content
    body = show(admin_api)
    assert body["version"] == 3 and body["warnings"] == []


def test_a_newest_version_that_is_not_a_mapping_can_be_replaced_through_the_api(admin_api, v1):
    write_directly(["not", "a", "mapping"], 2)
    assert show(admin_api)["version"] == 1
    response = put(admin_api, {**v1, "guard": {"policy": "strict"}}, 2)
    assert response.status_code == 200, response.content
    assert show(admin_api)["version"] == 3


# --- the file after the import --------------------------------------------------

def test_a_changed_file_is_named_in_the_warnings_and_ignored(viewer_api, settings_file, original):
    show(viewer_api)
    changed = {**original, "defaults": {"engine": "sglang", "scaling": {"min": 1, "max": 20}},
               "cluster_name": "renamed", "listen": "0.0.0.0:9999"}
    settings_file.write(changed)  # longer than before, so the file's size changes too
    body = show(viewer_api)
    [warning] = body["warnings"]
    assert "cluster_name" in warning and "defaults" in warning
    assert "engines" not in warning and "models" not in warning
    assert body["version"] == 1 and body["document"]["defaults"]["engine"] == "vllm"
    file_layers = {layer["key"]: layer for layer in body["layers"] if layer["source"] == "file"}
    assert all(file_layers[k]["ignored"] for k in ("cluster_name", "engines", "defaults", "models"))
    assert file_layers["listen"] == {"key": "listen", "value": "0.0.0.0:9999", "source": "file", "ignored": False}
    assert not file_layers["node_name"]["ignored"]
    assert SettingsVersion.objects.count() == 1
    assert viewer_api.get("/api/v1/models/declared-cpu").json()["engine"] == "llama.cpp"


def test_a_file_equal_to_the_store_gives_no_warning(viewer_api, settings_file, original):
    show(viewer_api)
    settings_file.write({**original, "listen": "0.0.0.0:65000"})
    assert show(viewer_api)["warnings"] == []


# --- secrets --------------------------------------------------------------------

@pytest.fixture
def peer_token(admin_api, settings_file, original) -> str:
    """A cluster whose file and store hold a federation peer token."""
    settings_file.write({**original, "federation": {
        "peers": [{"name": "east", "url": "https://east.example", "token": TOKEN}], "offer": "all"}})
    assert show(admin_api)["version"] == 1
    return TOKEN


def test_a_peer_token_never_appears_in_any_settings_answer_or_audit_row(admin_api, viewer_api, peer_token):
    document = show(admin_api)["document"]
    assert document["federation"]["peers"][0]["token"] == SECRET_MASK
    answers = [
        put(admin_api, {**document, "guard": {"policy": "strict"}}, 1),
        admin_api.put(f"{SETTINGS}/keys/federation.peers.0.url", {"value": "https://east2.example",
                                                                  "base_version": 2}, format="json"),
        admin_api.post(f"{SETTINGS}/preview", {"document": document, "base_version": 3}, format="json"),
        admin_api.post(f"{SETTINGS}/rollback", {"version": 1, "base_version": 3}, format="json"),
        admin_api.delete(f"{SETTINGS}/keys/guard?base_version=4"),
    ]
    assert [a.status_code for a in answers] == [200] * 5, [a.content for a in answers]
    answers += [viewer_api.get(path) for path in (
        SETTINGS, f"{SETTINGS}/versions", f"{SETTINGS}/versions/1", f"{SETTINGS}/versions/5?diff=1",
        f"{SETTINGS}/versions/1?diff=5", f"{SETTINGS}/keys/federation", f"{SETTINGS}/keys/federation.peers.0.token",
        "/api/v1/audit")]
    assert all(a.status_code == 200 for a in answers)
    for answer in answers:
        assert peer_token not in answer.content.decode(), answer.request["PATH_INFO"]
    assert peer_token not in json.dumps(list(AuditEvent.objects.values("before", "after")))
    assert peer_token not in json.dumps(list(CatalogVersion.objects.values("document", "reason")))
    assert stored(5)["federation"]["peers"][0]["token"] == peer_token


def test_a_document_written_back_with_the_masked_token_keeps_the_stored_token(admin_api, peer_token):
    document = show(admin_api)["document"]
    response = put(admin_api, {**document, "cluster_name": "prod"}, 1)
    assert response.status_code == 200, response.content
    assert stored(2)["federation"]["peers"][0]["token"] == peer_token


def test_a_new_token_replaces_the_stored_one_and_is_not_shown(admin_api, peer_token):
    document = show(admin_api)["document"]
    document["federation"]["peers"][0]["token"] = "rotated-token-31c7"
    response = put(admin_api, document, 1)
    assert "rotated-token-31c7" not in response.content.decode()
    assert stored(2)["federation"]["peers"][0]["token"] == "rotated-token-31c7"


# --- roles ----------------------------------------------------------------------

READS = [SETTINGS, f"{SETTINGS}/keys/guard.policy", f"{SETTINGS}/versions", f"{SETTINGS}/versions/1",
         f"{SETTINGS}/versions/1?diff=1"]


def writes(api):
    document = copy.deepcopy(stored(1))
    return [
        api.put(SETTINGS, {"document": {**document, "guard": {"policy": "strict"}}, "base_version": 1},
                format="json"),
        api.put(f"{SETTINGS}/keys/guard.policy", {"value": "strict", "base_version": 1}, format="json"),
        api.delete(f"{SETTINGS}/keys/cluster_name?base_version=1"),
        api.post(f"{SETTINGS}/rollback", {"version": 1, "base_version": 1}, format="json"),
    ]


@pytest.mark.parametrize("persona", ["viewer_api", "operator_api"])
def test_viewers_and_operators_read_settings(request, persona):
    api = request.getfixturevalue(persona)
    assert [api.get(path).status_code for path in READS] == [200] * len(READS)


@pytest.mark.parametrize("persona", ["viewer_api", "operator_api"])
def test_viewers_and_operators_get_403_on_every_settings_write(request, persona):
    api = request.getfixturevalue(persona)
    show(api)
    answers = writes(api)
    assert [a.status_code for a in answers] == [403] * len(answers)
    for answer in answers:
        errors_of(answer)
    assert SettingsVersion.objects.count() == 1 and AuditEvent.objects.filter(actor=api.user.username).count() == 0


def test_an_admin_may_write_settings(admin_api):
    show(admin_api)
    answers = writes(admin_api)
    assert answers[0].status_code == 200
    assert [a.status_code for a in answers[1:]] == [409, 409, 409]  # each based on version 1, now stale


def test_anonymous_calls_get_401(anonymous_api):
    answers = [anonymous_api.get(path) for path in READS]
    answers += [anonymous_api.put(SETTINGS, {"document": {}, "base_version": 1}, format="json"),
                anonymous_api.post(f"{SETTINGS}/preview", {"document": {}}, format="json"),
                anonymous_api.delete(f"{SETTINGS}/keys/guard?base_version=1")]
    assert [a.status_code for a in answers] == [401] * len(answers)
    assert not SettingsVersion.objects.exists()
