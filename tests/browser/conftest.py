"""Browser tests: Playwright driving Debian's Chromium against ``live_server``.

One browser for the session (starting Chromium costs seconds), one fresh
context per test, so cookies and sessions never leak between tests. No
browser is ever downloaded: without /usr/bin/chromium these tests skip,
except on CI (LLMGW_REQUIRE_SERVICES), where a missing browser would hide
every console flow and so fails them.
"""

from __future__ import annotations

import os

import pytest
from playwright.sync_api import Page, expect, sync_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
PASSWORD = "correct horse battery"  # the personas' password (tests/conftest.py)
DESKTOP = {"width": 1280, "height": 900}

# htmx waits (debounce 300-400 ms, then a round trip); generous for a
# loaded 2-core CI machine, and never a sleep: expect() returns as soon as
# the page shows what it should.
expect.set_options(timeout=10_000)


@pytest.fixture(scope="session")
def browser():
    if not os.access(CHROMIUM, os.X_OK):
        from django.conf import settings

        reason = f"browser tests need Debian's chromium at {CHROMIUM} (apt-get install chromium)"
        if settings.LLMGW_REQUIRE_SERVICES:
            pytest.fail(f"{reason} (LLMGW_REQUIRE_SERVICES is set, so this is a failure)", pytrace=False)
        pytest.skip(reason)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(autouse=True)
def _close_connections_after_each_request(monkeypatch):
    """The live server answers each browser socket in its own thread, whose
    database connection would otherwise live for CONN_MAX_AGE: a keep-alive
    socket still open at the end would hold PostgreSQL's test database open,
    and the session could not drop it."""
    from django.db import connections

    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)


@pytest.fixture
def page(browser, live_server) -> Page:
    """A page in a fresh context, addressed relative to the live server.

    A JavaScript error on any page (htmx missing, a broken swap) fails the
    test that caused it, even when the assertions happened to pass.
    """
    context = browser.new_context(base_url=live_server.url, viewport=DESKTOP)
    context.set_default_timeout(10_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert not errors, f"JavaScript errors in the page: {errors}"


def _log_in(page: Page, username: str, password: str = PASSWORD) -> None:
    """Log in through the login page, as a person would: asking for the
    console sends there, and back after."""
    page.goto("/models/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()


@pytest.fixture
def log_in():
    """``log_in(page, username)``: through the login page."""
    return _log_in


@pytest.fixture
def as_operator(page, operator_user) -> Page:
    _log_in(page, operator_user.username)
    return page


@pytest.fixture
def as_admin(page, admin_user) -> Page:
    _log_in(page, admin_user.username)
    return page
