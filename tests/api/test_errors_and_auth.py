"""One error shape everywhere, `{"detail", "errors"}`, with the status SPEC
§8 names; never a 500 for bad input; who may do what."""

from __future__ import annotations

import json

import pytest
from django.conf import settings

from catalog.models import StoredModel

pytestmark = pytest.mark.django_db


SOURCE = "hf://acme/chat-7b"


def model(name: str, **fields) -> dict:
    return {"name": name, "source": SOURCE, **fields}


def assert_error(response, status: int) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = json.loads(response.content)
    assert set(body) == {"detail", "errors"}
    assert isinstance(body["detail"], str) and body["detail"]
    assert isinstance(body["errors"], dict)
    for path, messages in body["errors"].items():
        assert isinstance(path, str) and messages and all(isinstance(m, str) and m for m in messages)
    return body


@pytest.fixture
def runtime_model(operator_api):
    response = operator_api.post("/api/v1/models", model("acme/a"), format="json")
    assert response.status_code == 201
    return "acme/a"


# --- 400 ----------------------------------------------------------------------

def test_malformed_json_is_400_in_the_error_shape(operator_api):
    response = operator_api.post("/api/v1/models", data='{"name": "acme/a", ', content_type="application/json")
    assert "JSON" in assert_error(response, 400)["detail"]


@pytest.mark.parametrize("body", ["[]", '"acme/a"', "null", "42", "[{\"name\": \"acme/a\"}]"])
def test_a_body_that_is_not_an_object_is_400_not_500(operator_api, runtime_model, body):
    for method, url in (("post", "/api/v1/models"), ("put", f"/api/v1/models/{runtime_model}"),
                        ("patch", f"/api/v1/models/{runtime_model}"),
                        ("post", f"/api/v1/models/{runtime_model}/-/resources")):
        response = getattr(operator_api, method)(url, data=body, content_type="application/json")
        assert_error(response, 400)


@pytest.mark.parametrize("definition, paths", [
    (model("acme/b", profiles=[{"name": "gpu"}, {"name": "cpu", "gpus": 0}]), {"profiles.1.min_memory_gb"}),
    (model("acme/b", fallbacks=["llama", "llama"]), {"fallbacks.1"}),
    (model("acme/b", aliases=["ok", "bad name"]), {"aliases.1"}),
    (model("acme/b", adapters=[{"name": "x", "source": "ftp://nope"}]), {"adapters.0.source"}),
    (model("acme/b", canary={"model": "llama", "percent": 100}), {"canary.percent"}),
    (model("acme/b", eval={"suite": "", "min_score": 0.5}), {"eval.suite"}),
    (model("acme/b", engine="tgi"), {"engine"}),
    (model("acme/b", scaling={"min": -1}), {"scaling.min"}),
    ({"source": SOURCE}, {"name"}),
    (model("acme/b/-/x"), {"name"}),
    (model("acme/b", origin={"repo": 3}), {"origin.repo"}),
])
def test_invalid_definitions_are_400_with_dotted_field_paths(operator_api, definition, paths):
    body = assert_error(operator_api.post("/api/v1/models", definition, format="json"), 400)
    assert set(body["errors"]) == paths


def test_a_change_that_breaks_another_model_is_reported_under_non_field_errors_naming_it(
        operator_api, runtime_model):
    operator_api.post("/api/v1/models", model("acme/b", fallbacks=["short"]), format="json")  # not there yet
    operator_api.put("/api/v1/models/acme/a", model("acme/a", aliases=["short"]), format="json")
    operator_api.post("/api/v1/models", model("acme/b", fallbacks=["short"]), format="json")
    # acme/a dropping its alias would leave acme/b's fallback pointing at nothing.
    response = operator_api.put("/api/v1/models/acme/a", model("acme/a"), format="json")
    body = assert_error(response, 400)
    assert "acme/b" in " ".join(body["errors"].get("non_field_errors", []))


# --- 404 / 405 / 409 / 413 / 415 ----------------------------------------------

def test_an_unknown_api_path_is_404_in_the_error_shape(viewer_api):
    assert_error(viewer_api.get("/api/v1/nothing-here"), 404)
    assert_error(viewer_api.get("/api/v2/models"), 404)


def test_a_method_a_path_does_not_allow_is_405_in_the_error_shape(operator_api, runtime_model):
    assert_error(operator_api.delete("/api/v1/models"), 405)
    assert_error(operator_api.get(f"/api/v1/models/{runtime_model}/-/resources"), 405)
    assert_error(operator_api.post("/api/v1/catalog", {}, format="json"), 405)


def test_a_declared_model_is_409_in_the_error_shape(operator_api):
    assert "settings" in assert_error(operator_api.delete("/api/v1/models/declared-cpu"), 409)["detail"]


def test_a_body_over_one_mebibyte_is_413_and_nothing_is_added(operator_api):
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE == 1024 * 1024
    big = json.dumps(model("acme/big", description="x" * (1024 * 1024)))
    operator_api.raise_request_exception = False  # what a real client would get back
    assert_error(operator_api.post("/api/v1/models", data=big, content_type="application/json"), 413)
    assert not StoredModel.objects.filter(name="acme/big").exists()


def test_a_body_just_under_the_limit_is_parsed(operator_api):
    definition = model("acme/big", description="x" * 3000)
    padded = json.dumps(definition) + " " * (1024 * 1024 - len(json.dumps(definition)) - 1)
    body = assert_error(operator_api.post("/api/v1/models", data=padded, content_type="application/json"), 400)
    assert set(body["errors"]) == {"description"}  # past the parser, refused by the builder


def test_a_body_that_is_not_json_is_415_in_the_error_shape(operator_api):
    response = operator_api.post("/api/v1/models", data="name=acme/a", content_type="application/x-www-form-urlencoded")
    assert_error(response, 415)


# --- 401 / 403 ----------------------------------------------------------------

def test_no_token_is_401_with_a_bearer_challenge(anonymous_api):
    response = anonymous_api.get("/api/v1/models")
    assert_error(response, 401)
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("header", ["Bearer not-a-token", "Bearer", "Bearer a b", "Token llmgw_x"])
def test_a_bad_token_is_401(anonymous_api, header):
    assert_error(anonymous_api.get("/api/v1/models", HTTP_AUTHORIZATION=header), 401)


def test_a_viewer_reads_but_cannot_write(viewer_api, runtime_model):
    assert viewer_api.get(f"/api/v1/models/{runtime_model}").status_code == 200
    assert_error(viewer_api.post("/api/v1/models", model("acme/b"), format="json"), 403)
    assert_error(viewer_api.patch(f"/api/v1/models/{runtime_model}", {"owner": ""}, format="json"), 403)
    assert_error(viewer_api.delete(f"/api/v1/models/{runtime_model}"), 403)
    assert StoredModel.objects.filter(name=runtime_model).exists()


def test_an_admin_may_do_what_an_operator_may(admin_api, runtime_model):
    response = admin_api.patch(f"/api/v1/models/{runtime_model}", {"owner": "team:x"}, format="json")
    assert response.status_code == 200 and response.json()["owner"] == "team:x"


def test_a_logged_in_console_session_reads_the_api_but_writes_only_with_csrf(viewer_user, operator_user):
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(operator_user)
    assert browser.get("/api/v1/models").status_code == 200
    assert_error(browser.post("/api/v1/models", data=json.dumps(model("acme/b")),
                              content_type="application/json"), 403)
    assert not StoredModel.objects.filter(name="acme/b").exists()
