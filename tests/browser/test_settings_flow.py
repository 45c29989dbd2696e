"""The Settings screens as an admin uses them: preview a change and its
impact on the catalog, save it, roll back to an older version, and be
stopped (without losing the text) when someone saved in between."""

from __future__ import annotations

import re

import yaml
from playwright.sync_api import expect

from catalog import selectors
from catalog.models import SettingsVersion
from catalog.services.settings import set_setting


def with_model(text: str, model: dict) -> str:
    """The editor's text with one more declared model, as a person would type it."""
    document = yaml.safe_load(text)
    document["models"].append(model)
    return yaml.safe_dump(document, sort_keys=False)


def test_previewing_a_settings_change_shows_its_impact_then_saving_makes_a_new_version(as_admin):
    page = as_admin
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Settings").click()
    expect(page).to_have_url(re.compile(r"/settings/$"))
    expect(page.locator("#settings-layers")).to_contain_text("declared/llama")

    editor = page.locator("#editor-document")
    text = with_model(editor.input_value(), {"name": "declared/new", "source": "hf://acme/new"})
    editor.fill(text)
    page.locator("#settings-preview-button").click()
    preview = page.locator("#settings-preview")
    expect(preview).to_contain_text("Saving this would")
    expect(preview.locator(".impact-added")).to_contain_text("Adds declared/new")
    expect(page.locator("#editor-document")).to_have_value(text)  # the preview keeps what was typed
    assert SettingsVersion.objects.count() == 1  # a preview stores nothing

    page.locator("#editor-comment").fill("a model for the new team")
    page.locator("#settings-save-button").click()
    expect(page).to_have_url(re.compile(r"/settings/$"))
    expect(page.get_by_role("status")).to_contain_text("Settings saved as version 2.")
    expect(page.locator("#settings-result .impact-added")).to_contain_text("declared/new")
    assert [m["name"] for m in SettingsVersion.objects.get(number=2).document["models"]][-1] == "declared/new"

    page.goto("/models/?kind=declared")
    expect(page.get_by_role("link", name="declared/new")).to_be_visible()


def test_rolling_back_writes_a_newer_version_with_the_older_content(as_admin):
    page = as_admin
    first = selectors.settings_in_force().version
    set_setting(key="defaults.scaling.max", value=5, base_version=first, by="someone", comment="more replicas")

    page.goto("/settings/history")
    expect(page.locator("#settings-history tbody tr")).to_have_count(2)
    page.locator(f"#rollback-{first}").click()
    expect(page).to_have_url(re.compile(rf"/settings/rollback/{first}$"))
    expect(page.locator("#rollback-changes")).to_contain_text("defaults")
    expect(page.locator("#rollback-impact")).to_contain_text("Changes declared/llama: scaling")

    page.locator("#settings-rollback-confirm").click()
    expect(page.get_by_role("status")).to_contain_text(f"Rolled back to version {first}: settings version 3.")
    rolled = SettingsVersion.objects.get(number=3)
    assert rolled.document == SettingsVersion.objects.get(number=first).document
    assert rolled.document["defaults"]["scaling"]["max"] == 2

    page.goto("/settings/history")
    expect(page.locator("#settings-version-3")).to_contain_text(f"rollback to v{first}")
    expect(page.locator("#settings-version-3")).to_contain_text("newest")


def test_a_stale_save_shows_the_newer_version_and_keeps_the_text(as_admin):
    page = as_admin
    page.goto("/settings/")
    editor = page.locator("#editor-document")
    expect(page.locator("#settings-editor-panel h3")).to_contain_text("based on version 1")
    text = with_model(editor.input_value(), {"name": "declared/mine", "source": "hf://acme/mine"})
    editor.fill(text)

    # Someone else saves while the page is open.
    set_setting(key="defaults.scaling.max", value=4, base_version=1, by="someone-else", comment="more replicas")

    page.locator("#settings-save-button").click()
    conflict = page.locator("#settings-conflict")
    expect(conflict).to_contain_text("Version 2 was saved since you started from version 1")
    expect(conflict).to_contain_text("someone-else")
    expect(conflict).to_contain_text("more replicas")
    expect(conflict.locator("tr[data-key='defaults.scaling.max'], tr[data-key='defaults']")).to_have_count(1)
    expect(page.locator("#editor-document")).to_have_value(text)
    expect(page.locator("#settings-editor-panel h3")).to_contain_text("based on version 2")
    assert SettingsVersion.objects.count() == 2  # nothing was written over the other change

    # Saving again is now a deliberate choice, made with the difference on screen.
    page.locator("#settings-save-button").click()
    expect(page.get_by_role("status")).to_contain_text("Settings saved as version 3.")
