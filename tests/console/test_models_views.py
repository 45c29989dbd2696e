"""The Models screens through Django's test client: what each page shows to
whom, the table's filters and pages in the URL, the htmx fragments, and
every operation form with a bad and a good value."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from catalog import selectors
from catalog.models import PeerOffer, StoredModel
from catalog.services.models import add_model

from tests.conftest import TEST_SETTINGS

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
NAME = "acme/chat-7b:q4"  # '/' and ':' in a name must survive every URL
PAGE = f"/models/{NAME}"


def runtime(name: str, **fields) -> dict:
    return add_model(definition={"name": name, "source": f"hf://acme/{name.split('/')[-1].split(':')[0]}",
                                 **fields}, by="tests")


def store_rows(count: int, prefix: str = "bulk/m") -> None:
    """Rows written directly, as a big catalog would have: fast, no service."""
    StoredModel.objects.bulk_create(
        StoredModel(name=f"{prefix}-{i:04d}", definition=json.dumps({"name": f"{prefix}-{i:04d}",
                                                                      "source": f"hf://acme/m-{i}"}))
        for i in range(count))





def links(body: str) -> set[str]:
    return {html.unescape(href) for href in re.findall(r'href="([^"]*)"', body)}


def names_in(response) -> list[str]:
    return [m["name"] for m in response.context["models"]]


# --- the Models table -------------------------------------------------------

@pytest.fixture
def mixed_catalog():
    runtime("acme/chat-7b", engine="sglang", owner="team:ml", description="the chat model")
    runtime("acme/coder-1b", engine="llama.cpp", profiles=[{"name": "cpu", "gpus": 0, "min_memory_gb": 8}])
    runtime("acme/batch", scaling={"min": 0, "max": 1})


@pytest.mark.parametrize("query, expected", [
    ("kind=runtime", ["acme/batch", "acme/chat-7b", "acme/coder-1b"]),
    ("kind=declared", ["declared-cpu", "declared/llama"]),
    ("class=critical", ["declared/llama"]),
    ("class=opportunistic", ["acme/batch"]),
    ("engine=llama.cpp", ["acme/coder-1b", "declared-cpu"]),
    ("owner=team:ml", ["acme/chat-7b"]),
    ("q=chat", ["acme/chat-7b"]),
    ("q=LLAMA", ["declared/llama"]),  # an alias, in any case
    ("q=the+chat+model", ["acme/chat-7b"]),  # the description
    ("kind=runtime&engine=vllm", ["acme/batch"]),
    ("q=nothing-like-it", []),
])
def test_models_table_filters_by_the_parameters_in_the_url(viewer, mixed_catalog, query, expected):
    response = viewer.get(f"/models/?{query}")
    assert response.status_code == 200
    assert names_in(response) == expected


def test_models_table_says_when_nothing_matches_the_search(viewer, mixed_catalog):
    response = viewer.get("/models/?q=nothing-like-it")
    assert "No model matches “nothing-like-it”." in response.content.decode()


@pytest.mark.parametrize("sort, expected", [
    ("name", ["acme/batch", "acme/chat-7b", "acme/coder-1b", "declared-cpu", "declared/llama"]),
    ("-name", ["declared/llama", "declared-cpu", "acme/coder-1b", "acme/chat-7b", "acme/batch"]),
    ("engine", ["acme/coder-1b", "declared-cpu", "acme/chat-7b", "acme/batch", "declared/llama"]),
    ("-kind", ["acme/coder-1b", "acme/chat-7b", "acme/batch", "declared/llama", "declared-cpu"]),
])
def test_models_table_sorts_by_the_column_in_the_url(viewer, mixed_catalog, sort, expected):
    assert names_in(viewer.get(f"/models/?sort={sort}")) == expected


def test_sort_links_keep_the_filters_and_flip_the_order_of_the_sorted_column(viewer, mixed_catalog):
    page = viewer.get("/models/?kind=runtime&q=acme&sort=name").content.decode()
    assert "?kind=runtime&q=acme&sort=-name" in links(page)  # name again: descending
    assert "?kind=runtime&q=acme&sort=engine" in links(page)
    assert 'aria-sort="ascending"' in page


def test_models_table_pages_keep_the_filters_in_their_links(viewer):
    store_rows(60)
    first = viewer.get("/models/?kind=runtime&sort=-name")
    assert len(first.context["models"]) == 50
    assert names_in(first)[0] == "bulk/m-0059"
    assert "?kind=runtime&sort=-name&page=2" in links(first.content.decode())
    assert "Page 1 of 2 · 60 models" in first.content.decode()

    second = viewer.get("/models/?kind=runtime&sort=-name&page=2")
    assert names_in(second) == [f"bulk/m-{i:04d}" for i in range(9, -1, -1)]
    assert "?kind=runtime&sort=-name&page=1" in links(second.content.decode())

    # A page past the end (an old bookmark) shows the last one, not an error.
    assert names_in(viewer.get("/models/?kind=runtime&sort=-name&page=9")) == names_in(second)


def test_htmx_asks_for_the_table_and_gets_only_the_table(viewer, mixed_catalog):
    fragment = viewer.get("/models/?q=chat", **HTMX)
    body = fragment.content.decode()
    assert fragment.status_code == 200
    assert '<table class="models">' in body
    assert "<html" not in body and 'class="filters"' not in body
    assert "acme/chat-7b" in body and "acme/coder-1b" not in body

    whole = viewer.get("/models/?q=chat").content.decode()
    assert "<html" in whole and 'class="filters"' in whole and 'id="models-table"' in whole


def test_the_models_page_lists_skipped_rows_with_their_reason(viewer):
    StoredModel.objects.create(name="broken/row", definition="{not json")
    StoredModel.objects.create(name="declared/llama", definition=json.dumps(
        {"name": "declared/llama", "source": "hf://acme/x"}))
    page = viewer.get("/models/").content.decode()
    assert 'id="skipped"' in page
    assert "broken/row" in page and "declared/llama" in page
    assert "Skipped at load" in page


def _queries_of_models_page(client, count_runtime: int, prefix: str) -> int:
    store_rows(count_runtime, prefix=prefix)
    selectors.clear_cache()
    with CaptureQueriesContext(connection) as cold:
        assert client.get("/models/?sort=-name").status_code == 200
    with CaptureQueriesContext(connection) as warm:
        assert client.get("/models/?sort=-name").status_code == 200
    return len(cold.captured_queries), len(warm.captured_queries)


def test_models_page_queries_do_not_grow_with_the_number_of_models(viewer):
    viewer.get("/models/")  # the first read imports the settings file
    few = _queries_of_models_page(viewer, 10, "few/m")
    StoredModel.objects.all().delete()
    many = _queries_of_models_page(viewer, 200, "many/m")
    assert few == many, f"queries (cold, warm) with 10 models: {few}; with 200: {many}"


# --- a model's page ---------------------------------------------------------

def test_a_declared_model_page_is_read_only_and_points_to_the_settings(operator):
    response = operator.get("/models/declared/llama")
    body = response.content.decode()
    assert response.status_code == 200
    assert "Declared in the cluster settings: read-only here." in body
    assert 'href="/settings/"' in body
    assert "operations" not in response.context
    assert 'class="panel operation"' not in body and "Remove…" not in body


def test_an_alias_in_the_address_goes_to_the_models_own_page(viewer):
    response = viewer.get("/models/llama")
    assert response.status_code == 302
    assert response["Location"] == "/models/declared/llama"


def test_an_unknown_model_page_is_not_found(viewer):
    assert viewer.get("/models/no/such-model").status_code == 404


def test_a_federated_model_page_names_its_peer_and_offers_nothing_to_change(operator, settings_file):
    settings_file.write({**TEST_SETTINGS, "federation": {"peers": [
        {"name": "east", "url": "https://east.example", "token": "a-shared-secret"}]}})
    PeerOffer.objects.create(peer="east", offered=[{"name": "big-model", "engine": "vllm"}])
    response = operator.get("/models/east/big-model")
    body = response.content.decode()
    assert response.status_code == 200, body
    assert "Offered by peer cluster <strong>east</strong>" in body
    assert 'class="panel operation"' not in body and "Remove…" not in body


OPERATION_IDS = ["scale", "resources", "class", "owner", "adapters", "source", "canary", "eval", "fallbacks"]


def test_an_operator_gets_every_operation_form_on_a_runtime_model(operator):
    runtime(NAME)
    body = operator.get(PAGE).content.decode()
    for op in OPERATION_IDS:
        assert f'id="op-{op}"' in body, op
        assert f'action="/models/{NAME}/-/{op}"' in body
    assert f'href="/models/{NAME}/-/remove"' in body


def test_a_viewer_sees_a_runtime_model_but_no_form_to_change_it(viewer):
    runtime(NAME)
    response = viewer.get(PAGE)
    body = response.content.decode()
    assert response.status_code == 200
    assert "Your role can look but not change models." in body
    assert "<form" not in body.split("<main", 1)[1]  # the only form is the header's Log out
    assert "/-/remove" not in body


def test_a_runtime_models_page_marks_the_fields_left_to_the_defaults(viewer):
    runtime(NAME, engine="sglang")
    body = viewer.get(PAGE).content.decode()
    assert body.count('class="badge default"') >= 1
    engine_row = body.split("<dt>engine", 1)[1].split("</dt>", 1)[0]
    scaling_row = body.split("<dt>scaling", 1)[1].split("</dt>", 1)[0]
    assert "default" not in engine_row  # set by its author
    assert "default" in scaling_row  # the cluster's defaults apply


def test_a_models_page_shows_plain_values_as_typed(viewer):
    """A description or a source is shown as text, not as a YAML document
    with its end marker (``...``) under it."""
    runtime(NAME, description="Support replies", owner="team:ml")
    body = viewer.get(PAGE).content.decode()
    for key, value in (("description", "Support replies"), ("source", "hf://acme/chat-7b"), ("owner", "team:ml")):
        shown = body.split(f"<dt>{key}", 1)[1].split("<dd>", 1)[1].split("</dd>", 1)[0]
        assert value in shown
        assert "..." not in shown, f"{key} is shown as {shown!r}"


# --- operations: a bad value shows the builder's error, a good one changes the model

def _built(name: str = NAME) -> dict:
    return selectors.in_force().catalog.resolve(name)


# op -> (bad form data, message on the field, good form data, check of the model built)
OPERATIONS = {
    "scale": ({"min": "3", "max": "1"}, "max",
              {"min": "0", "max": "3"}, lambda m: m["scaling"] == {"min": 0, "max": 3}),
    "resources": ({"min_memory_gb": "-1", "cpu_cores": "4"}, "min_memory_gb",
                  {"min_memory_gb": "32", "cpu_cores": "8"},
                  lambda m: (m["profiles"][0]["min_memory_gb"], m["profiles"][0]["cpu_cores"]) == (32, 8)),
    "class": ({"klass": "platinum"}, "klass", {"klass": "critical"}, lambda m: m["class"] == "critical"),
    "owner": ({"owner": "nobody in particular"}, "owner", {"owner": "team:ml"}, lambda m: m["owner"] == "team:ml"),
    "adapters": ({"adapters": "sql-lora ftp://nowhere/x"}, "adapters", {"adapters": "sql-lora hf://acme/sql-lora"},
                 lambda m: m["adapters"] == [{"name": "sql-lora", "source": "hf://acme/sql-lora"}]),
    "source": ({"source": "ftp://nowhere/weights"}, "source", {"source": "s3://weights/chat-7b"},
               lambda m: m["source"] == "s3://weights/chat-7b"),
    "canary": ({"canary_model": "no-such-model", "percent": "10"}, "canary_model",
               {"canary_model": "llama", "percent": "10"},
               lambda m: m["canary"] == {"model": "llama", "percent": 10}),
    "eval": ({"suite": "mmlu", "min_score": "2"}, "min_score", {"suite": "mmlu", "min_score": "0.7"},
             lambda m: m["eval"] == {"suite": "mmlu", "min_score": 0.7}),
    "fallbacks": ({"fallbacks": NAME}, "fallbacks", {"fallbacks": "llama, declared-cpu"},
                  lambda m: m["fallbacks"] == ["llama", "declared-cpu"]),
}


def _prefixed(op: str, data: dict) -> dict:
    return {f"{op}-{key}": value for key, value in data.items()}


def _field_errors(response, op: str, field: str) -> str:
    body = response.content.decode()
    marker = f'id="errors-{op}-{field}"' if op else f'id="errors-{field}"'
    assert marker in body, f"no error box for {field} in:\n{body}"
    return body.split(marker, 1)[1].split(">", 1)[1].split("</div>", 1)[0]


@pytest.mark.parametrize("op", list(OPERATIONS))
def test_an_operation_posted_by_htmx_with_a_bad_value_returns_the_form_with_the_error_on_its_field(operator, op):
    runtime(NAME)
    before = StoredModel.objects.get(name=NAME).definition
    bad, field, _, _ = OPERATIONS[op]
    response = operator.post(f"{PAGE}/-/{op}", _prefixed(op, bad), **HTMX)
    assert response.status_code == 200  # htmx swaps only 2xx answers
    assert response.content.decode().lstrip().startswith(f'<form class="panel operation" id="op-{op}"')
    assert "<p>" in _field_errors(response, op, field)
    assert StoredModel.objects.get(name=NAME).definition == before


@pytest.mark.parametrize("op", list(OPERATIONS))
def test_an_operation_posted_by_htmx_with_a_good_value_changes_the_model_and_refreshes(operator, op):
    runtime(NAME)
    _, _, good, check = OPERATIONS[op]
    response = operator.post(f"{PAGE}/-/{op}", _prefixed(op, good), **HTMX)
    assert response.status_code == 204, response.content.decode()
    assert response["HX-Refresh"] == "true"
    assert check(_built()), _built()


def test_an_operation_posted_without_javascript_shows_the_whole_page_with_the_error(operator):
    runtime(NAME)
    response = operator.post(f"{PAGE}/-/fallbacks", _prefixed("fallbacks", {"fallbacks": NAME}))
    assert response.status_code == 400
    assert "<html" in response.content.decode()
    assert "a model cannot fall back to itself" in _field_errors(response, "fallbacks", "fallbacks")

    saved = operator.post(f"{PAGE}/-/fallbacks", _prefixed("fallbacks", {"fallbacks": "llama"}), follow=True)
    assert saved.redirect_chain == [(PAGE, 302)]
    assert f"Fallbacks of {NAME} saved." in saved.content.decode()
    assert _built()["fallbacks"] == ["llama"]


def test_an_error_on_another_model_is_shown_at_the_top_of_the_form_with_its_name(operator):
    runtime("acme/base")
    runtime(NAME, fallbacks=["acme/base"])
    response = operator.post("/models/acme/base/-/fallbacks", _prefixed("fallbacks", {"fallbacks": NAME}), **HTMX)
    body = response.content.decode()
    assert response.status_code == 200
    assert "fallbacks form a cycle" in body
    assert _built("acme/base")["fallbacks"] == []


def test_an_operation_on_a_declared_model_changes_nothing(operator):
    response = operator.post("/models/declared/llama/-/scale", _prefixed("scale", {"min": "0", "max": "5"}))
    assert response.status_code == 302
    assert _built("declared/llama")["scaling"] == {"min": 1, "max": 2}


def test_an_unknown_operation_is_not_found(operator):
    runtime(NAME)
    assert operator.post(f"{PAGE}/-/teleport", {}).status_code == 404


# --- adding -----------------------------------------------------------------

def test_the_add_check_shows_only_the_errors_of_fields_typed_in(operator):
    response = operator.post("/models/add/check", {"mode": "form", "name": "acme/new", "fallbacks": "nope"})
    body = response.content.decode()
    assert response.status_code == 200
    assert "Not valid yet" in body
    # Only errors are swapped beside the fields (out of band), never the fields themselves.
    assert 'id="errors-name" hx-swap-oob="true"' in body and "<input" not in body
    assert _field_errors(response, "", "source").strip() == ""  # not typed yet: no "required" noise


def test_the_add_check_puts_the_builders_message_on_the_field_and_previews_a_valid_model(operator):
    data = {"mode": "form", "name": "acme/new", "source": "hf://acme/new", "fallbacks": "nope"}
    refused = operator.post("/models/add/check", data)
    assert "fallback &#x27;nope&#x27; is not a model of the catalog" in _field_errors(refused, "", "fallbacks")

    valid = operator.post("/models/add/check", {**data, "fallbacks": "llama"})
    body = valid.content.decode()
    assert "✓ Valid" in body
    assert "engine: vllm" in body and "max: 2" in body  # the defaults, applied
    assert _field_errors(valid, "", "fallbacks").strip() == ""
    assert not StoredModel.objects.filter(name="acme/new").exists()


def test_the_add_check_refuses_a_declared_name_and_says_where_to_edit_it(operator):
    response = operator.post("/models/add/check", {"mode": "form", "name": "declared/llama",
                                                   "source": "hf://acme/new"})
    body = response.content.decode()
    assert "Not valid yet" in body
    assert "settings" in body.lower()


def test_the_add_check_reads_a_pasted_document(operator):
    good = operator.post("/models/add/check", {"mode": "yaml", "document": "name: acme/new\nsource: hf://acme/new\n"})
    assert "✓ Valid" in good.content.decode()
    bad = operator.post("/models/add/check", {"mode": "yaml", "document": "name: acme/new\nsource: hf://acme/new\n"
                                                                          "colour: blue\n"})
    assert "colour" in _field_errors(bad, "", "document")


def test_adding_a_model_lands_on_its_page(operator):
    response = operator.post("/models/add/", {"mode": "form", "name": NAME, "source": "hf://acme/chat",
                                              "fallbacks": "llama", "scaling_max": "4"}, follow=True)
    assert response.redirect_chain == [(PAGE, 302)]
    assert f"{NAME} was added." in response.content.decode()
    assert json.loads(StoredModel.objects.get(name=NAME).definition) == {
        "name": NAME, "source": "hf://acme/chat", "fallbacks": ["llama"], "scaling": {"max": 4}}


def test_adding_a_model_with_errors_keeps_what_was_typed(operator):
    response = operator.post("/models/add/", {"mode": "form", "name": NAME, "source": "hf://acme/chat",
                                              "fallbacks": "nope"})
    body = response.content.decode()
    assert response.status_code == 400
    assert 'value="hf://acme/chat"' in body and 'value="nope"' in body
    assert "is not a model of the catalog" in _field_errors(response, "", "fallbacks")
    assert not StoredModel.objects.exists()


def test_adding_a_pasted_model_lands_on_its_page(operator):
    response = operator.post("/models/add/", {"mode": "yaml", "document": f"name: {NAME}\nsource: hf://acme/chat\n"})
    assert response.status_code == 302 and response["Location"] == PAGE


# --- removing ---------------------------------------------------------------

def test_the_remove_page_names_who_depends_on_the_model_and_offers_no_button(operator):
    runtime("acme/base")
    runtime(NAME, fallbacks=["acme/base"])
    body = operator.get("/models/acme/base/-/remove").content.decode()
    assert "Other models depend on it" in body
    assert f"<code>{NAME}</code></a> falls back to it" in body
    assert 'type="submit" class="danger"' not in body


def test_removing_a_model_others_fall_back_to_is_refused_with_their_names(operator):
    runtime("acme/base")
    runtime(NAME, fallbacks=["acme/base"])
    response = operator.post("/models/acme/base/-/remove")
    assert response.status_code == 409
    assert f"&#x27;{NAME}&#x27; falls back to it" in response.content.decode()
    assert StoredModel.objects.filter(name="acme/base").exists()


def test_removing_a_free_model_goes_back_to_the_table(operator):
    runtime(NAME)
    response = operator.post(f"{PAGE}/-/remove", follow=True)
    assert response.redirect_chain == [("/models/", 302)]
    assert f"{NAME} was removed." in response.content.decode()
    assert not StoredModel.objects.filter(name=NAME).exists()


def test_a_declared_model_has_no_remove_page(operator):
    response = operator.get("/models/declared/llama/-/remove")
    assert response.status_code == 302 and response["Location"] == "/models/declared/llama"
