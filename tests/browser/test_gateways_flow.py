"""The Gateways screen: register a gateway, watch the table follow it
until it is in sync, then stop refreshing itself."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from catalog.models import Gateway
from catalog.reference_gateway import ReferenceGateway
from catalog.selectors import latest_catalog_version
from catalog.services.gateways import deliver

TOKEN = "reference-gateway-token-0001"


@pytest.fixture
def reference_gateway():
    gateway = ReferenceGateway(TOKEN)
    server, url = gateway.start()
    gateway.url = url
    yield gateway
    server.shutdown()
    server.server_close()


def test_a_registered_gateway_is_followed_live_until_it_is_in_sync(as_admin, reference_gateway):
    page = as_admin
    reference_gateway.faults = {"status": 500}  # down when it is registered
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Gateways").click()
    expect(page).to_have_url(re.compile(r"/gateways/$"))
    expect(page.locator("#gateways tbody")).to_contain_text("No gateway is registered")

    form = page.locator("#gateway-add-form")
    form.get_by_label("Name").fill("edge-1")
    form.get_by_label("Base URL").fill(reference_gateway.url)
    form.get_by_label("Token").fill(TOKEN)
    page.locator("#gateway-add-button").click()

    row = page.locator("#gateway-edge-1")
    expect(page.get_by_role("status")).to_contain_text("Gateway edge-1 added")
    expect(row).to_have_attribute("data-state", "failing")
    expect(row.locator(".last-error")).not_to_be_empty()
    table = page.locator("#gateways-table")
    expect(table).to_have_attribute("data-polling", "true")
    expect(table.locator(".badge.live")).to_be_visible()

    # The gateway recovers and the next delivery (the worker's retry) reaches it;
    # nobody touches the page: its own refresh shows the new state.
    reference_gateway.faults = {}
    assert deliver(Gateway.objects.get(name="edge-1").pk) in ("acked", "in_sync")
    latest = latest_catalog_version().version
    expect(row).to_have_attribute("data-state", "in_sync")
    expect(row.locator(".acked")).to_contain_text(f"v{latest}")
    expect(table).to_contain_text("1 of 1 enabled gateway in sync")
    assert reference_gateway.version == latest

    # Settled: the table no longer asks the server every two seconds.
    expect(table).to_have_attribute("data-polling", "false")
    expect(table).not_to_have_attribute("hx-trigger", re.compile(".*"))
    expect(table.locator(".badge.live")).to_have_count(0)


def test_a_bad_gateway_registration_shows_the_errors_on_its_fields(as_admin):
    page = as_admin
    page.goto("/gateways/")
    form = page.locator("#gateway-add-form")
    form.get_by_label("Name").fill("Edge One")
    form.get_by_label("Base URL").fill("ftp://edge")
    form.get_by_label("Token").fill("short")
    page.locator("#gateway-add-button").click()
    form = page.locator("#gateway-add-form")
    expect(form.locator(".field.invalid")).to_have_count(3)
    expect(form).to_contain_text("a gateway's name is a-z, 0-9")
    expect(form.get_by_label("Base URL")).to_have_value("ftp://edge")
    assert not Gateway.objects.exists()
