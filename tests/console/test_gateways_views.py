"""The Gateways screen (SPEC §5, §7): state of each gateway, live refresh
only while one is converging, push now, and the registry — with the token
never shown back.

Plain ``db``: the delivery a registration or a push queues runs on commit,
which never comes here, so no test sends anything over the network.
"""

from __future__ import annotations

import html

import pytest

from catalog import selectors
from catalog.models import AuditEvent, Gateway
from catalog.services import gateways as gateway_services

pytestmark = pytest.mark.django_db


def text(response) -> str:
    return html.unescape(response.content.decode())

HTMX = {"HTTP_HX_REQUEST": "true"}
TOKEN = "gw-secret-0123456789abcdef"
POLLING = 'hx-trigger="every 2s"'







def gateway(name: str, *, acked: bool = False, enabled: bool = True, token: str | None = None, **fields) -> Gateway:
    """A registered gateway, on the newest catalog version when ``acked``."""
    latest = selectors.latest_catalog_version() or _first_version()
    row = gateway_services.register_gateway(name=name, url=f"http://{name}.example:8080",
                                            token=token or f"{name}-token-0123456789", enabled=enabled, by="tests")
    Gateway.objects.filter(pk=row.pk).update(acked_version=latest.version if acked else None, **fields)
    return row


def _first_version():
    selectors.in_force()  # the first read imports the settings and records catalog v1
    return selectors.latest_catalog_version()


def test_the_table_shows_each_gateway_its_state_and_acked_version(viewer):
    gateway("edge-1", acked=True)
    gateway("edge-2", last_error="version 1: connection refused", failures=2)
    body = text(viewer.get("/gateways/"))
    assert 'id="gateway-edge-1" data-name="edge-1" data-state="in_sync"' in body
    assert 'id="gateway-edge-2" data-name="edge-2" data-state="failing"' in body
    assert "connection refused" in body
    assert 'id="catalog-version">v1<' in body and "1 of 2 enabled gateways in sync" in body


def test_the_table_polls_while_a_gateway_converges_and_stops_when_all_are_in_sync(viewer):
    gateway("edge-1", acked=True)
    behind = gateway("edge-2")
    page = text(viewer.get("/gateways/"))
    assert POLLING in page and 'hx-get="/gateways/"' in page
    Gateway.objects.filter(pk=behind.pk).update(acked_version=selectors.latest_catalog_version().version)
    # The poll answers the table alone, without the trigger: htmx swaps it in and stops asking.
    fragment = viewer.get("/gateways/", **HTMX)
    assert fragment.status_code == 200
    body = text(fragment)
    assert body.lstrip().startswith('<div id="gateways-table"') and "<html" not in body
    assert POLLING not in body and "hx-get" not in body.split(">", 1)[0]
    assert POLLING not in text(viewer.get("/gateways/"))


def test_a_disabled_gateway_that_is_behind_does_not_keep_the_page_polling(viewer):
    gateway("edge-1", acked=True)
    gateway("old-edge", enabled=False)
    assert POLLING not in text(viewer.get("/gateways/"))


def test_a_rejected_version_waits_for_a_person_and_does_not_keep_the_page_polling(viewer):
    gateway("edge-1", rejected_version=1, last_error="version 1 rejected: unknown engine")
    body = text(viewer.get("/gateways/"))
    assert 'data-state="rejected"' in body and POLLING not in body


def test_a_viewer_sees_no_push_add_or_remove_and_gets_403_posting_them(viewer):
    gateway("edge-1")
    body = text(viewer.get("/gateways/"))
    assert 'id="push-edge-1"' not in body and 'id="remove-edge-1"' not in body
    assert 'id="gateway-add-form"' not in body
    assert viewer.post("/gateways/edge-1/push").status_code == 403
    assert viewer.post("/gateways/add", {"name": "x", "url": "http://x", "token": TOKEN}).status_code == 403
    assert viewer.post("/gateways/edge-1/remove").status_code == 403
    assert Gateway.objects.count() == 1
    assert not AuditEvent.objects.filter(action="gateway.push").exists()


def test_an_operator_pushes_now_but_cannot_add_or_remove(operator, operator_user):
    gateway("edge-1", failures=3, last_error="version 1: timeout")
    body = text(operator.get("/gateways/"))
    assert 'id="push-edge-1"' in body and 'id="gateway-add-form"' not in body and 'id="remove-edge-1"' not in body
    response = operator.post("/gateways/edge-1/push", **HTMX)
    assert response.status_code == 200
    assert text(response).lstrip().startswith('<div id="gateways-table"')
    assert AuditEvent.objects.filter(action="gateway.push", object_id="edge-1", actor=operator_user.username).exists()
    assert Gateway.objects.get(name="edge-1").next_attempt_at is None  # the backoff is waived
    assert operator.post("/gateways/add", {"name": "x", "url": "http://x.example", "token": TOKEN}).status_code == 403
    assert operator.post("/gateways/edge-1/remove").status_code == 403
    assert list(Gateway.objects.values_list("name", flat=True)) == ["edge-1"]


def test_pushing_to_a_disabled_gateway_is_refused_with_the_reason(operator):
    gateway("old-edge", enabled=False)
    response = operator.post("/gateways/old-edge/push", follow=True)
    assert "is disabled; enable it first" in text(response)
    assert 'id="push-old-edge"' not in text(response)  # not offered either


def test_an_admin_adds_a_gateway_and_its_token_is_never_shown_back(admin, admin_user):
    _first_version()
    response = admin.post("/gateways/add", {"name": "edge-9", "url": "http://edge-9.example:8080", "token": TOKEN,
                                            "enabled": "on"}, follow=True)
    assert response.status_code == 200
    body = text(response)
    assert "Gateway edge-9 added" in body and 'id="gateway-edge-9"' in body
    assert TOKEN not in body
    assert Gateway.objects.get(name="edge-9").enabled
    assert AuditEvent.objects.filter(action="gateway.add", object_id="edge-9", actor=admin_user.username).exists()


def test_an_invalid_gateway_shows_errors_on_its_fields_and_not_the_token(admin):
    _first_version()
    response = admin.post("/gateways/add", {"name": "Edge 9!", "url": "ftp://edge", "token": "secret-15-chars"},
                          **HTMX)
    assert response.status_code == 200  # htmx swaps only 2xx answers
    body = text(response)
    assert body.lstrip().startswith('<form method="post" action="/gateways/add" id="gateway-add-form"')
    assert "gateway's name is a-z" in body.split('id="gateway-name_error"', 1)[1].split("</div>", 1)[0]
    assert "base URL" in body.split('id="gateway-url_error"', 1)[1].split("</div>", 1)[0]
    assert "16 to 500 characters" in body.split('id="gateway-token_error"', 1)[1].split("</div>", 1)[0]
    assert "secret-15-chars" not in body
    assert 'type="password"' in body
    assert not Gateway.objects.exists()


def test_a_gateway_name_taken_is_refused_above_the_form(admin):
    gateway("edge-1")
    response = admin.post("/gateways/add", {"name": "edge-1", "url": "http://other.example", "token": TOKEN})
    assert response.status_code == 400
    assert "registered already" in text(response)
    assert Gateway.objects.count() == 1


def test_an_admin_removes_a_gateway_after_confirming(admin, admin_user):
    gateway("edge-1")
    page = admin.get("/gateways/edge-1/remove")
    assert page.status_code == 200 and 'id="gateway-remove-form"' in text(page)
    assert Gateway.objects.filter(name="edge-1").exists()  # asking removes nothing
    response = admin.post("/gateways/edge-1/remove", follow=True)
    assert "Gateway edge-1 removed" in text(response)
    assert not Gateway.objects.exists()
    assert AuditEvent.objects.filter(action="gateway.remove", object_id="edge-1", actor=admin_user.username).exists()
