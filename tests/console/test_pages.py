"""The reading screens — Sources, Catalog versions, Federation, Audit — the
person's API tokens, and the error pages (SPEC §7)."""

from __future__ import annotations

import html
import socket
from datetime import timedelta

import pytest
from django.db import OperationalError
from django.test import Client
from django.utils import timezone

from catalog import selectors
from catalog.models import ApiToken, AuditEvent, CatalogVersion, PeerOffer
from catalog.services import models as model_services
from catalog.services import users as user_services
from tests.conftest import TEST_SETTINGS

pytestmark = pytest.mark.django_db


def text(response) -> str:
    return html.unescape(response.content.decode())







def add(name: str, **fields) -> dict:
    return model_services.add_model(definition={"name": name, "source": f"hf://acme/{name.split('/')[-1]}", **fields},
                                    by="alice")


# --- Sources ----------------------------------------------------------------

def test_sources_list_each_weights_source_with_the_models_using_it_linked(viewer):
    add("rt/chat", adapters=[{"name": "sql", "source": "hf://acme/sql-lora"}])
    body = text(viewer.get("/sources/"))
    assert 'data-source="hf://meta-llama/Llama-3.1-8B-Instruct"' in body
    row = body.split('data-source="hf://acme/sql-lora"', 1)[1].split("</tr>", 1)[0]
    assert '<a href="/models/rt/chat"><code>rt/chat</code></a>' in row  # an adapter's source counts too
    assert "runtime" in row


def test_sources_can_be_searched(viewer):
    add("rt/chat")
    body = text(viewer.get("/sources/", {"q": "acme/chat"}))
    assert 'data-source="hf://acme/chat"' in body
    assert "meta-llama" not in body


# --- Catalog versions -------------------------------------------------------

def test_catalog_versions_are_listed_newest_first_with_who_why_and_settings_version(viewer):
    add("rt/chat")
    body = text(viewer.get("/catalog/versions/"))
    assert body.index('id="catalog-version-2"') < body.index('id="catalog-version-1"')
    row = body.split('id="catalog-version-2"', 1)[1].split("</tr>", 1)[0]
    digest = CatalogVersion.objects.get(version=2).digest
    assert digest.removeprefix("sha256:")[:12] in row and "alice" in row and "model.add rt/chat" in row
    assert ">v1</a>" in row  # the settings version it was built with


def test_a_catalog_version_shows_its_models_and_a_model_level_diff(viewer):
    add("rt/chat")
    add("rt/code", fallbacks=["rt/chat"])
    model_services.scale_model(name="rt/chat", min=0, max=3, by="alice")
    page = viewer.get("/catalog/versions/4", {"diff": 2})
    assert page.status_code == 200
    body = text(page)
    assert 'data-name="rt/code"' in body and 'data-name="declared/llama"' in body
    diff = body.split('id="version-diff"', 1)[1].split("</section>", 1)[0]
    assert "added</span> <a href=\"/models/rt/code\">" in diff
    assert "changed</span> <a href=\"/models/rt/chat\"><code>rt/chat</code></a>: scaling" in diff
    assert viewer.get("/catalog/versions/99").status_code == 404
    assert "no catalog version 77" in text(viewer.get("/catalog/versions/4", {"diff": 77}))


# --- Federation -------------------------------------------------------------

def closed_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def peers(settings_file):
    """Two peers: east answered a minute ago; west never answered. East also
    offers a model whose name this cluster already uses."""
    settings_file.write({**TEST_SETTINGS, "federation": {"peers": [
        {"name": "east", "url": closed_url(), "token": "east-token-0123456789"},
        {"name": "declared", "url": closed_url(), "token": "declared-token-0123456789"},
    ], "offer": ["declared/llama"]}})
    now = timezone.now()
    PeerOffer.objects.create(peer="east", offered=[{"name": "chat", "engine": "vllm"}], fetched_at=now,
                             checked_at=now)
    PeerOffer.objects.create(peer="declared", offered=[{"name": "llama", "engine": "vllm"}],
                             fetched_at=now - timedelta(hours=2), checked_at=now, last_error="HTTP 503")


def test_federation_shows_peers_stale_ones_collisions_and_our_offer(peers, viewer):
    body = text(viewer.get("/federation/"))
    east = body.split('id="peer-east"', 1)[1].split("</tr>", 1)[0]
    assert 'data-stale="false"' in east and '<a href="/models/east/chat"><code>east/chat</code></a>' in east
    stale = body.split('id="peer-declared"', 1)[1].split("</tr>", 1)[0]
    assert 'data-stale="true"' in stale and "HTTP 503" in stale
    collisions = body.split('id="collisions"', 1)[1].split("</section>", 1)[0]
    assert "'declared/llama' is not offered" in collisions
    offer = body.split('id="own-offer"', 1)[1].split("</section>", 1)[0]
    assert "declared/llama" in offer and "declared-cpu" not in offer
    assert "east-token-0123456789" not in body
    assert 'id="federation-fetch-button"' not in body  # a viewer cannot fetch


def test_fetch_now_is_for_operators_and_keeps_an_unreachable_peers_last_offer(peers, viewer, operator):
    assert viewer.post("/federation/fetch").status_code == 403
    assert 'id="federation-fetch-button"' in text(operator.get("/federation/"))
    response = operator.post("/federation/fetch", follow=True)
    body = text(response)
    assert "Fetched 2 peer(s); no fresh offer from" in body
    east = PeerOffer.objects.get(peer="east")
    assert east.last_error and east.offered == [{"name": "chat", "engine": "vllm"}]
    assert "east/chat" in body


# --- Audit ------------------------------------------------------------------

def test_audit_lists_events_newest_first_with_before_and_after(viewer):
    add("rt/chat")
    model_services.scale_model(name="rt/chat", min=0, max=3, by="bob")
    body = text(viewer.get("/audit/"))
    assert body.index('data-action="model.scale"') < body.index('data-action="model.add"')
    scale = body.split('data-action="model.scale"', 1)[1].split("</tr>", 1)[0]
    assert "<details><summary>before / after</summary>" in scale
    before, after = scale.split("<h4>Before</h4>", 1)[1].split("<h4>After</h4>", 1)
    assert "scaling" not in before and "source: hf://acme/chat" in before  # as YAML
    assert "scaling:\n" in after and "  min: 0" in after and "  max: 3" in after


def test_audit_filters_by_actor_object_action_and_since_in_the_url(viewer):
    add("rt/chat")
    add("rt/code")
    model_services.scale_model(name="rt/chat", min=0, max=3, by="bob")
    by_bob = text(viewer.get("/audit/", {"actor": "bob"}))
    assert by_bob.count("data-action=") == 1 and 'data-action="model.scale"' in by_bob
    assert 'value="bob"' in by_bob  # the filter is kept in the form
    on_chat = text(viewer.get("/audit/", {"object": "rt/chat"}))
    assert on_chat.count("data-action=") == 2
    adds = text(viewer.get("/audit/", {"action": "model.add"}))
    assert adds.count("data-action=") == 2
    AuditEvent.objects.filter(object_id="rt/code").update(at=timezone.now() - timedelta(days=3))
    recent = text(viewer.get("/audit/", {"object": "rt/code", "since": (timezone.now() - timedelta(days=1)).date()}))
    assert "data-action=" not in recent and "No event matches these filters" in recent
    bad = text(viewer.get("/audit/", {"since": "last tuesday"}))
    assert "is not a date" in bad


def test_audit_is_paginated(viewer):
    AuditEvent.objects.bulk_create(AuditEvent(actor="bulk", action="test.event", object_type="test",
                                              object_id=str(i)) for i in range(60))
    first = text(viewer.get("/audit/", {"actor": "bulk"}))
    assert first.count("data-action=") == 50 and "page 1 of 2" in first
    assert 'href="?actor=bulk&page=2"' in first
    second = text(viewer.get("/audit/", {"actor": "bulk", "page": 2}))
    assert second.count("data-action=") == 10


# --- Tokens -----------------------------------------------------------------

def test_a_new_token_key_is_shown_once_and_never_again(viewer, viewer_user):
    response = viewer.post("/tokens/create", {"name": "ci"})
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    body = text(response)
    key = body.split('id="token-key" class="code key" value="', 1)[1].split('"', 1)[0]
    assert key.startswith("llmgw_") and "shown this once" in body
    token = ApiToken.objects.get(user=viewer_user, name="ci")
    assert token.key_hash != key and key not in token.key_hash
    listing = text(viewer.get("/tokens/"))
    assert f"{token.prefix}…" in listing and key not in listing
    for url in ("/audit/", "/tokens/"):
        assert key not in text(viewer.get(url))
    # The key works on the API, with the viewer's role.
    api = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert api.get("/api/v1/models").status_code == 200


def test_people_see_only_their_own_tokens_and_revoke_them(viewer, viewer_user, operator_user):
    mine = user_services.create_token(username=viewer_user.username, name="mine", by="tests")
    user_services.create_token(username=operator_user.username, name="theirs", by="tests")
    body = text(viewer.get("/tokens/"))
    assert "mine" in body and "theirs" not in body and 'id="other-tokens"' not in body
    token = ApiToken.objects.get(name="mine")
    response = viewer.post(f"/tokens/{token.pk}/revoke", follow=True)
    assert "revoked: it no longer works" in text(response)
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert Client(HTTP_AUTHORIZATION=f"Bearer {mine}").get("/api/v1/models").status_code == 401


def test_revoking_someone_elses_token_needs_an_admin(viewer, admin, operator_user, admin_user):
    user_services.create_token(username=operator_user.username, name="theirs", by="tests")
    token = ApiToken.objects.get(name="theirs")
    assert viewer.post(f"/tokens/{token.pk}/revoke").status_code == 403
    token.refresh_from_db()
    assert token.revoked_at is None
    body = text(admin.get("/tokens/"))
    assert 'id="other-tokens"' in body and f'id="revoke-{token.pk}"' in body
    admin.post(f"/tokens/{token.pk}/revoke")
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert AuditEvent.objects.filter(action="token.revoke", object_id=str(token.pk), actor=admin_user.username).exists()


# --- Navigation, error pages ------------------------------------------------

def test_every_section_is_in_the_navigation(viewer):
    body = text(viewer.get("/sources/"))
    for label, url in (("Settings", "/settings/"), ("Gateways", "/gateways/"), ("Sources", "/sources/"),
                       ("Catalog versions", "/catalog/versions/"), ("Federation", "/federation/"),
                       ("Audit", "/audit/"), ("Tokens", "/tokens/")):
        assert f'<a href="{url}"' in body and label in body
    assert '<a href="/sources/" aria-current="page">' in body


@pytest.mark.parametrize("url", ["/settings/", "/settings/history", "/gateways/", "/sources/", "/catalog/versions/",
                                 "/federation/", "/audit/", "/tokens/"])
def test_anonymous_visitors_are_sent_to_log_in(client, url):
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_an_unknown_page_answers_a_friendly_404(viewer):
    response = viewer.get("/no/such/page/")
    assert response.status_code == 404
    body = text(response)
    assert "Not found" in body and "/no/such/page/" in body and "Traceback" not in body


def test_a_database_outage_answers_503_with_a_plain_page(viewer, monkeypatch):
    def down(*args, **kwargs):
        raise OperationalError("could not connect to server: Connection refused")

    monkeypatch.setattr(selectors, "in_force", down)
    response = viewer.get("/sources/")
    assert response.status_code == 503 and response["Retry-After"]
    body = text(response)
    assert "The database is unavailable" in body
    assert "Connection refused" not in body and "Traceback" not in body


def test_a_server_error_answers_the_friendly_500_page(viewer, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug with a secret in its message")

    monkeypatch.setattr(selectors, "in_force", broken)
    viewer.raise_request_exception = False
    response = viewer.get("/sources/")
    assert response.status_code == 500
    body = text(response)
    assert "Something went wrong" in body and "secret" not in body and "Traceback" not in body


def test_a_settings_file_that_cannot_be_imported_gives_a_plain_503_page(settings_file, admin):
    settings_file.write_text("engines: [vllm\n")  # broken YAML, on an empty store

    response = admin.get("/models/")

    assert response.status_code == 503
    page = text(response)
    assert "settings file cannot be imported" in page
    assert "Traceback" not in page


@pytest.mark.parametrize("url", ["/catalog/versions/1?diff=%C2%B2", "/settings/history?a=%C2%B2&b=1"])
def test_a_version_number_that_is_not_ascii_digits_is_no_server_error(admin, url):
    # '²' is a digit to Python's isdigit() but not to int().
    admin.get("/models/")  # the first start records catalog version 1

    assert admin.get(url).status_code < 500
