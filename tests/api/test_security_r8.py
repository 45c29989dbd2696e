"""Drill R8 for the API: every route in the URLconf under /api/, called
anonymously, as a viewer and as an operator; tokens never come back.

The routes are read from the URLconf, not listed here, so an endpoint added
later is covered without anyone remembering to add it.
"""

from __future__ import annotations

import json
import logging

import pytest
from django.urls import NoReverseMatch, URLPattern, URLResolver, get_resolver, reverse
from rest_framework.test import APIClient

from catalog.models import ApiToken, AuditEvent, StoredModel
from catalog.services.users import add_user, create_token, revoke_token

pytestmark = pytest.mark.django_db


RUNTIME = "acme/chat-7b:q4"  # a name with '/' and ':' in it
WRITES = ("post", "put", "patch", "delete")
METHODS = ("get", *WRITES)
OPEN = {"api-health"}  # SPEC §8: the one endpoint that answers without a token
# The endpoints of the catalog and its models (SPEC §8). None of them is
# admin-only: an operator may call every one.
OPERATOR_ROUTES = {"api-health", "api-models", "api-model", "api-model-resources", "api-skipped", "api-sources",
                   "api-catalog", "api-catalog-versions", "api-catalog-version", "api-audit", "api-not-found"}
ADMIN_ONLY: set[str] = set()  # none yet in OPERATOR_ROUTES


def _walk(patterns, prefix=""):
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from _walk(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            yield prefix + str(p.pattern), p


def _samples(kwarg: str) -> list[str]:
    """Values to try for a route's parameter, the most telling first (a
    gateway's name cannot hold a '/', a model's can)."""
    known = {"name": [RUNTIME, "sample"], "number": ["1"], "rest": ["v1/no-such-endpoint"],
             "key": ["cluster_name"]}
    return known.get(kwarg, ["sample", "1"])


def _concrete(pattern: URLPattern) -> str:
    kwargs = list(pattern.pattern.regex.groupindex)
    tried = []
    for i in range(max((len(_samples(k)) for k in kwargs), default=1)):
        values = {k: _samples(k)[min(i, len(_samples(k)) - 1)] for k in kwargs}
        try:
            return reverse(pattern.name, kwargs=values)
        except NoReverseMatch:
            tried.append(values)
    raise AssertionError(f"no sample value fits route {pattern.name!r} (tried {tried}); add one to _samples")


def api_routes() -> list[tuple[str, str, type]]:
    """(URL name, concrete URL, view class) of every API route."""
    out = []
    for route, pattern in _walk(get_resolver().url_patterns):
        view = getattr(pattern.callback, "view_class", None)
        if not route.startswith("api/") or view is None or route.startswith(("api/schema", "api/docs", "api/redoc")):
            continue
        assert pattern.name, f"the API route {route!r} has no name; name it so this drill can build its URL"
        out.append((pattern.name, _concrete(pattern), view))
    return out


def allowed(view: type) -> list[str]:
    return [m for m in METHODS if hasattr(view, m)]


def call(client, method: str, url: str):
    if method in ("get", "delete", "head", "options"):
        return getattr(client, method)(url)
    return getattr(client, method)(url, {}, format="json")


@pytest.fixture
def runtime_model(operator_api):
    response = operator_api.post("/api/v1/models", {"name": RUNTIME, "source": "hf://acme/chat-7b"}, format="json")
    assert response.status_code == 201, response.json()
    return RUNTIME


def test_the_drill_sees_the_catalog_routes():
    names = {name for name, _, _ in api_routes()}
    assert OPERATOR_ROUTES <= names
    assert f"/api/v1/models/{RUNTIME}" in {url for _, url, _ in api_routes()}


def test_anonymous_gets_401_everywhere_but_health(anonymous_api, runtime_model):
    failures = []
    for name, url, view in api_routes():
        for method in (*METHODS, "options", "head"):
            response = call(anonymous_api, method, url)
            expected = 200 if name in OPEN and method in ("get", "head", "options") else None
            if expected is None and name in OPEN:
                continue  # health only reads; writes there are 405
            if (expected or 401) != response.status_code:
                failures.append(f"{method.upper()} {url}: {response.status_code}")
            elif response.status_code == 401 and method != "head":
                body = response.json()
                if set(body) != {"detail", "errors"}:
                    failures.append(f"{method.upper()} {url}: 401 body {body}")
    assert not failures, "\n".join(failures)
    assert StoredModel.objects.filter(name=RUNTIME).exists()


def test_a_viewer_gets_403_on_every_write_and_reads_everything(viewer_api, runtime_model):
    rows, events = StoredModel.objects.count(), AuditEvent.objects.count()
    failures = []
    for name, url, view in api_routes():
        for method in allowed(view):
            response = call(viewer_api, method, url)
            if method in WRITES and response.status_code != 403:
                failures.append(f"{method.upper()} {url}: {response.status_code}, expected 403")
            if method == "get" and (response.status_code in (401, 403) or response.status_code >= 500):
                failures.append(f"GET {url}: {response.status_code}, a viewer reads")
    assert not failures, "\n".join(failures)
    assert (StoredModel.objects.count(), AuditEvent.objects.count()) == (rows, events)


def test_an_operator_is_refused_nothing_on_the_catalog_routes(operator_api, runtime_model):
    calls = [(name, method, url) for name, url, view in api_routes() if name in OPERATOR_ROUTES
             for method in allowed(view)]
    # Deletes last, so every other call still finds the model.
    calls.sort(key=lambda c: c[1] == "delete")
    failures = []
    for name, method, url in calls:
        response = call(operator_api, method, url)
        refused = response.status_code in (401, 403)
        if refused != (name in ADMIN_ONLY) or response.status_code >= 500:
            failures.append(f"{method.upper()} {url}: {response.status_code}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("url", ["/api/schema/", "/api/docs/", "/api/redoc/"])
def test_the_schema_and_docs_need_a_token(anonymous_api, viewer_api, url):
    assert anonymous_api.get(url).status_code == 401
    assert viewer_api.get(url).status_code == 200


def test_a_token_never_appears_in_a_response_an_audit_row_or_a_log(caplog):
    caplog.set_level(logging.DEBUG)
    add_user(username="rita", role="operator", password=None, by="root")
    key = create_token(username="rita", name="laptop", by="root")
    secret = key[len(ApiToken.objects.get().prefix):]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    seen = []

    def record(response):
        seen.append((response.status_code, dict(response.items()), response.content))
        return response

    record(api.post("/api/v1/models", {"name": RUNTIME, "source": "hf://acme/chat-7b"}, format="json"))
    record(api.get("/api/v1/models"))
    record(api.get(f"/api/v1/models/{RUNTIME}"))
    record(api.patch(f"/api/v1/models/{RUNTIME}", {"owner": "team:x"}, format="json"))
    record(api.put(f"/api/v1/models/{RUNTIME}", {"source": "s3://weights/chat"}, format="json"))
    record(api.post(f"/api/v1/models/{RUNTIME}/-/resources", {"min_memory_gb": 8, "cpu_cores": 2}, format="json"))
    record(api.post("/api/v1/models", {"name": "bad name"}, format="json"))
    record(api.post("/api/v1/models", data="{", content_type="application/json"))
    record(api.delete("/api/v1/models/declared/llama"))
    for url in ("/api/v1/catalog", "/api/v1/catalog/versions", "/api/v1/catalog/versions/1?diff=2",
                "/api/v1/audit", "/api/v1/audit?actor=rita", "/api/v1/skipped", "/api/v1/sources",
                "/api/v1/health", "/api/v1/nowhere", "/api/schema/"):
        record(api.get(url))
    record(api.delete(f"/api/v1/models/{RUNTIME}"))
    revoke_token(token_id=ApiToken.objects.get(name="laptop").pk, by="root")
    record(api.get("/api/v1/models"))  # refused: the revoked key must not be echoed either
    assert seen[-1][0] == 401 and seen[0][0] == 201

    for status, headers, content in seen:
        for text in (content.decode("utf-8", "replace"), json.dumps(headers)):
            assert secret not in text, f"the token came back in a {status} response"
    for row in AuditEvent.objects.values():
        assert secret not in json.dumps(row, default=str), f"the token is in audit row {row['action']}"
    for row in ApiToken.objects.values():
        assert secret not in json.dumps(row, default=str)
    assert secret not in caplog.text
