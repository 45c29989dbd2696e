"""Screenshots of each main screen for the README, taken from a realistic
catalog, and the layout checks a screenshot would show a person: nothing
wider than the window, every screen rendered with its content.

The PNGs land in docs/screenshots/ (README links them); rerunning the
tests refreshes them.
"""

from __future__ import annotations

import json
import socket
import struct
from pathlib import Path

import pytest
from playwright.sync_api import expect

from catalog import selectors
from catalog.models import StoredModel
from catalog.reference_gateway import ReferenceGateway
from catalog.services.gateways import register_gateway
from catalog.services.models import add_model
from catalog.services.settings import set_setting

SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
PHONE = {"width": 390, "height": 844}
GATEWAY_TOKEN = "screens-gateway-token-0001"

RUNTIME = [
    {"name": "meta-llama/Llama-3.1-70B-Instruct", "aliases": ["llama-70b"], "source": "hf://meta-llama/Llama-3.1-70B-Instruct",
     "description": "General chat, long context", "profiles": [{"name": "h100x4", "gpus": 4, "gpu_type": "H100"}],
     "scaling": {"min": 2, "max": 6}, "class": "critical", "owner": "team:assistants", "fallbacks": ["llama"]},
    {"name": "qwen2.5:7b", "source": "oci://registry.internal/models/qwen2.5:7b", "engine": "sglang",
     "description": "Cheap default for batch jobs", "scaling": {"min": 0, "max": 4}, "owner": "org:research"},
    {"name": "acme/support-bot", "source": "s3://acme-weights/support-bot/v3", "description": "Support replies",
     "adapters": [{"name": "billing", "source": "s3://acme-weights/lora/billing"}],
     "owner": "project:helpdesk", "fallbacks": ["qwen2.5:7b", "llama"],
     "origin": {"repo": "hf://acme/support-bot", "revision": "v3"}},
    {"name": "acme/support-bot-next", "source": "s3://acme-weights/support-bot/v4", "owner": "project:helpdesk",
     "eval": {"suite": "support-regression", "min_score": 0.82}},
    {"name": "mistralai/Mistral-7B-Instruct-v0.3", "source": "hf://mistralai/Mistral-7B-Instruct-v0.3",
     "engine": "vllm", "class": "opportunistic"},
]


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def realistic_catalog(transactional_db):
    """Declared models from the test settings, runtime models of every
    shape, one with a warning, one skipped row, gateways in two states."""
    for definition in RUNTIME[:3]:
        add_model(definition=definition, by="alice")
    add_model(definition=RUNTIME[3], by="bob")
    add_model(definition=RUNTIME[4], by="bob")
    from catalog.services.models import set_canary

    set_canary(name="acme/support-bot", canary={"model": "acme/support-bot-next", "percent": 10}, by="bob")
    # Rows that predate today's rules, written as an old release would have:
    # a CPU-only profile without host memory loads with a warning...
    StoredModel.objects.create(name="acme/embed-cpu", created_by="legacy", definition=json.dumps(
        {"name": "acme/embed-cpu", "engine": "llama.cpp", "source": "file:///models/embed.gguf",
         "description": "Embeddings on CPU nodes", "profiles": [{"name": "cpu", "gpus": 0}]}))
    # ...and one whose fallback was removed since is skipped at load.
    StoredModel.objects.create(name="legacy/old-chat", created_by="legacy", definition=json.dumps(
        {"name": "legacy/old-chat", "source": "hf://legacy/old-chat", "fallbacks": ["retired/chat-v1"]}))
    version = selectors.settings_in_force().version
    set_setting(key="defaults.scaling.max", value=3, base_version=version, by="admin-user",
                comment="room for the morning peak")
    gateway = ReferenceGateway(GATEWAY_TOKEN)
    server, url = gateway.start()
    register_gateway(name="edge-eu-1", url=url, token=GATEWAY_TOKEN, by="admin-user")
    register_gateway(name="edge-us-2", url=_closed_port_url(), token="screens-gateway-token-0002", by="admin-user")
    yield
    server.shutdown()
    server.server_close()


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def shoot(page, name: str) -> Path:
    """A full-page screenshot; then the check that the page is not wider
    than its window (the screenshot is kept to show what overflows)."""
    width = page.viewport_size["width"]
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.evaluate("() => window.scrollTo(0, 0)")  # sticky panels where a reader first sees them
    page.screenshot(path=str(path), full_page=True, animations="disabled", caret="hide")
    overflowing = page.evaluate(
        """(w) => [...document.querySelectorAll('body *')]
            .filter(e => e.getBoundingClientRect().right > w + 0.5 && !e.closest('.table-wrap'))
            .map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className ? '.' + e.className : ''))""",
        width)
    scroll_width = page.evaluate("() => document.documentElement.scrollWidth")
    assert scroll_width <= width, f"{name}: {scroll_width}px wide in a {width}px window; sticking out: {overflowing}"
    assert png_size(path)[0] == width
    return path


def test_screenshots_of_every_main_screen(as_admin, realistic_catalog):
    page = as_admin

    page.goto("/models/")
    expect(page.locator("#models-table tbody tr")).to_have_count(8)  # 2 declared + 6 runtime that load
    expect(page.locator("#skipped")).to_contain_text("legacy/old-chat")
    expect(page.locator("#models-table")).to_contain_text("1 warning")
    shoot(page, "models")

    page.goto("/models/acme/support-bot")
    expect(page.locator("dl.definition")).to_contain_text("qwen2.5:7b")
    expect(page.locator(".operations form.operation")).to_have_count(9)
    shoot(page, "model-detail")

    page.goto("/models/add/")
    page.get_by_label("Name", exact=True).fill("acme/summarizer")
    page.get_by_label("Source", exact=True).fill("hf://acme/summarizer")
    page.get_by_label("Fallbacks", exact=True).press_sequentially("qwen2.5:7b, gpt-4")
    expect(page.locator("#errors-fallbacks")).to_contain_text("'gpt-4' is not a model of the catalog")
    shoot(page, "model-add")

    page.goto("/settings/")
    expect(page.locator("#settings-layers")).to_contain_text("defaults")
    shoot(page, "settings")

    page.goto("/settings/history")
    expect(page.locator("#settings-history tbody tr")).to_have_count(2)
    shoot(page, "settings-history")

    page.goto("/gateways/")
    expect(page.locator("#gateway-edge-eu-1")).to_have_attribute("data-state", "in_sync")
    expect(page.locator("#gateway-edge-us-2")).to_have_attribute("data-state", "failing")
    shoot(page, "gateways")

    page.goto("/audit/")
    expect(page.locator("#audit tbody tr").first).to_be_visible()
    shoot(page, "audit")

    page.goto("/sources/")
    expect(page.locator("#sources")).to_contain_text("s3://acme-weights/lora/billing")
    shoot(page, "sources")

    page.set_viewport_size(PHONE)
    page.goto("/models/")
    expect(page.locator("#models-table tbody tr")).to_have_count(8)
    shoot(page, "models-phone")
