"""Drill R8 for the console: every route of ``catalog.urls``, called
anonymously, as a viewer, as an operator, and without a CSRF token.

The routes are read from the URLconf, so a page added later is covered
without anyone remembering to list it here; only the exceptions are named.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import NoReverseMatch, URLPattern, reverse

from catalog import urls as console_urls
from catalog.forms import OPERATIONS
from catalog.models import ApiToken, AuditEvent, SettingsVersion, StoredModel
from catalog.services.models import add_model
from catalog.services.users import add_user, create_token

pytestmark = pytest.mark.django_db

RUNTIME = "acme/chat-7b:q4"  # a runtime model whose name holds '/' and ':'
# Where signing in and out happen: open to anyone by nature.
AUTH_ROUTES = {"login", "logout"}
# A person's own API tokens: every role manages its own (a viewer needs one
# to read the API); another's token is the admin's business (tested below).
SELF_SERVICE = {"tokens", "token-create", "token-revoke"}
# Pages whose only purpose is a change: a role that may not make the change
# is refused the page itself, not only the form's POST.
CHANGE_PAGES = {"model-add", "model-add-check", "model-remove", "settings-preview", "settings-save",
                "settings-key", "settings-rollback", "gateway-add", "gateway-push", "gateway-remove",
                "federation-fetch"}
# SPEC §7: settings and gateways are the admin's; an operator changes runtime models and pushes.
ADMIN_ONLY_WRITES = {"settings", "settings-preview", "settings-save", "settings-key", "settings-rollback",
                     "gateways", "gateway-add", "gateway-remove"}

SAMPLES = {"name": [RUNTIME, "sample-gateway"], "op": list(OPERATIONS), "number": ["1"], "token_id": ["1"]}


def _urls_of(pattern: URLPattern) -> list[str]:
    """Concrete URLs for a route: one per operation for the operation route,
    else the first sample values that reverse."""
    kwargs = list(pattern.pattern.regex.groupindex)
    if not kwargs:
        return [reverse(pattern.name)]
    if "op" in kwargs:
        return [reverse(pattern.name, kwargs={"name": RUNTIME, "op": op}) for op in OPERATIONS]
    tried = []
    for i in range(max(len(SAMPLES.get(k, ["sample"])) for k in kwargs)):
        values = {k: SAMPLES.get(k, ["sample"])[min(i, len(SAMPLES.get(k, ["sample"])) - 1)] for k in kwargs}
        try:
            return [reverse(pattern.name, kwargs=values)]
        except NoReverseMatch:
            tried.append(values)
    raise AssertionError(f"no sample value fits route {pattern.name!r} (tried {tried}); add one to SAMPLES")


def console_routes() -> list[tuple[str, str]]:
    """(route name, concrete URL) of every console route."""
    out = []
    for pattern in console_urls.urlpatterns:
        assert isinstance(pattern, URLPattern), f"{pattern!r}: walk nested routes here too"
        assert pattern.name, f"the console route {pattern.pattern} has no name; name it so this drill can build it"
        out.extend((pattern.name, url) for url in _urls_of(pattern))
    return out


ROUTES = console_routes()


def routes(*, only=None, but=frozenset()):
    """The routes as pytest parameters, with their URL as the test id."""
    return [pytest.param(route, url, id=url) for route, url in ROUTES
            if (only is None or route in only) and route not in but]


@pytest.fixture(autouse=True)
def runtime_model(db):
    """A runtime model for the model routes to aim at."""
    add_model(definition={"name": RUNTIME, "source": "hf://acme/chat-7b"}, by="tests")


@pytest.fixture
def nothing_changes(runtime_model):
    """Fails the test if a refused request changed anything a write would."""
    def snapshot():
        return (list(StoredModel.objects.values_list("name", "definition")),
                SettingsVersion.objects.count(), ApiToken.objects.filter(revoked_at__isnull=True).count(),
                AuditEvent.objects.exclude(action__startswith="user.").count())

    before = snapshot()
    yield
    assert snapshot() == before, "a refused request changed something"


def _signed_in(user, **options) -> Client:
    client = Client(**options)
    client.force_login(user)
    return client


def _lands_on_login(response) -> bool:
    return response.status_code == 200 and response.request["PATH_INFO"] == "/login/"


@pytest.mark.parametrize("route, url", routes(but=AUTH_ROUTES))
def test_an_anonymous_visitor_is_sent_to_log_in(nothing_changes, client, route, url):
    for method in (client.get, client.post):
        first = method(url)
        assert first.status_code == 302, f"{method.__name__.upper()} {url} answered {first.status_code}"
        if route != "home":  # the home page redirects to the Models page first
            assert first["Location"].startswith("/login/?next="), first["Location"]
        assert _lands_on_login(method(url, follow=True))


@pytest.mark.parametrize("route, url", routes(but=AUTH_ROUTES | SELF_SERVICE | {"home"}))
def test_a_viewer_is_refused_every_change(nothing_changes, viewer_user, route, url):
    response = _signed_in(viewer_user).post(url, {"name": "x", "document": "{}"})
    assert response.status_code == 403, f"POST {url} as viewer answered {response.status_code}"
    assert "This needs the" in response.content.decode()


@pytest.mark.parametrize("route, url", routes(but=AUTH_ROUTES))
def test_a_viewer_may_look_but_is_refused_the_pages_made_to_change_things(nothing_changes, viewer_user, route, url):
    response = _signed_in(viewer_user).get(url)
    if route in CHANGE_PAGES:
        assert response.status_code == 403, f"GET {url} as viewer answered {response.status_code}"
    else:
        assert response.status_code in (200, 302), f"GET {url} as viewer answered {response.status_code}"


@pytest.mark.parametrize("route, url", routes(only=ADMIN_ONLY_WRITES))
def test_an_operator_is_refused_the_admins_changes(nothing_changes, operator_user, route, url):
    response = _signed_in(operator_user).post(url, {"name": "x", "document": "{}"})
    assert response.status_code == 403, f"POST {url} as operator answered {response.status_code}"


@pytest.mark.parametrize("route, url", routes())
def test_a_form_posted_without_its_csrf_token_is_refused(nothing_changes, admin_user, route, url):
    client = Client(enforce_csrf_checks=True) if route == "login" else _signed_in(admin_user,
                                                                                  enforce_csrf_checks=True)
    data = {"username": admin_user.username, "password": "correct horse battery"} if route == "login" else {}
    if route.startswith("model-operation"):
        data = {"fallbacks-fallbacks": "llama"}
    response = client.post(url, data)
    assert response.status_code == 403, f"POST {url} without a CSRF token answered {response.status_code}"
    assert "CSRF" in response.content.decode()


def test_a_form_posted_with_its_csrf_token_is_accepted(operator_user):
    """The drill above is only worth something if the same post with its
    token goes through."""
    client = _signed_in(operator_user, enforce_csrf_checks=True)
    page = client.get(f"/models/{RUNTIME}")
    token = page.context["csrf_token"]
    response = client.post(f"/models/{RUNTIME}/-/owner", {"csrfmiddlewaretoken": str(token), "owner-owner": ""})
    assert response.status_code == 302


def test_a_viewer_cannot_revoke_someone_elses_token(viewer_user):
    other = add_user(username="someone-else", role="operator", password=None, by="tests")
    create_token(username=other.username, by="tests")
    token = ApiToken.objects.get(user=other)
    response = _signed_in(viewer_user).post(reverse("token-revoke", kwargs={"token_id": token.pk}))
    assert response.status_code == 403
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None


def test_the_drill_covers_every_operation_and_page():
    """A route this drill cannot build would silently not be tested."""
    names = {route for route, _ in ROUTES}
    assert {p.name for p in console_urls.urlpatterns} == names
    assert sum(1 for route, _ in ROUTES if route == "model-operation") == len(OPERATIONS)
    assert json.dumps(sorted(CHANGE_PAGES - names)) == "[]", "a listed change page is no longer routed"
