"""The Models screens as a person uses them: log in, add a model with the
form checking it while typing, change its fallbacks, find it in the table,
remove it (or be told who still needs it)."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from catalog.models import StoredModel
from catalog.services.models import add_model

PASSWORD = "correct horse battery"  # the personas' (tests/conftest.py)


def runtime(name: str, **fields) -> dict:
    return add_model(definition={"name": name, "source": f"hf://acme/{name.split('/')[-1]}", **fields}, by="tests")


def test_logging_in_through_the_login_page_lands_on_the_models_table(page, viewer_user):
    page.goto("/models/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/models/$"))

    page.get_by_label("Username").fill(viewer_user.username)
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_text("Your username and password did not match.")).to_be_visible()

    page.get_by_label("Username").fill(viewer_user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(r"/models/$"))
    expect(page.get_by_role("heading", name=re.compile("^Models"))).to_be_visible()
    expect(page.locator(".who")).to_contain_text("viewer")
    expect(page.get_by_role("link", name="declared/llama")).to_be_visible()
    # A viewer is not offered what it may not do.
    expect(page.get_by_role("link", name="Add model")).to_have_count(0)


def test_logging_out_leaves_the_console_and_asks_to_log_in_again(as_operator):
    page = as_operator
    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    page.goto("/models/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/models/$"))


def test_logging_in_on_the_login_page_itself_lands_on_the_console(page, operator_user):
    page.goto("/login/")
    page.get_by_label("Username").fill(operator_user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
    expect(page).to_have_url(re.compile(r"/models/$"))


def test_adding_a_model_checks_the_fallbacks_while_typing_and_lands_on_its_page(as_operator):
    page = as_operator
    page.goto("/models/")
    page.get_by_role("link", name="Add model").click()
    expect(page).to_have_url(re.compile(r"/models/add/$"))

    page.get_by_label("Name", exact=True).press_sequentially("acme/chat-7b")
    page.get_by_label("Source", exact=True).press_sequentially("hf://acme/chat-7b")
    fallbacks = page.get_by_label("Fallbacks", exact=True)
    fallbacks.press_sequentially("nope")

    # The error appears beside the field while the page stays where it is.
    field_errors = page.locator("#errors-fallbacks")
    expect(field_errors).to_contain_text("fallback 'nope' is not a model of the catalog")
    expect(page.locator("#add-check")).to_contain_text("Not valid yet")
    expect(page).to_have_url(re.compile(r"/models/add/$"))
    assert not StoredModel.objects.filter(name="acme/chat-7b").exists()
    expect(fallbacks).to_be_focused()  # the check swapped the errors, not the field being typed in

    fallbacks.fill("")
    fallbacks.press_sequentially("llama")  # the declared model's alias
    expect(field_errors).to_be_empty()
    preview = page.locator("#add-check")
    expect(preview).to_contain_text("Valid: this is the model as it will run")
    expect(preview.locator("pre")).to_contain_text("name: acme/chat-7b")
    expect(preview.locator("pre")).to_contain_text("engine: vllm")  # the cluster's default, applied
    expect(preview.locator("pre")).to_contain_text("llama")

    page.get_by_role("button", name="Add model").click()
    expect(page).to_have_url(re.compile(r"/models/acme/chat-7b$"))
    expect(page.get_by_role("status")).to_contain_text("acme/chat-7b was added.")
    expect(page.get_by_role("heading", level=1)).to_contain_text("acme/chat-7b")
    expect(page.locator("dl.definition")).to_contain_text("llama")
    assert StoredModel.objects.filter(name="acme/chat-7b").exists()


def test_fallbacks_form_shows_the_builders_message_then_saves_a_valid_list(as_operator):
    page = as_operator
    runtime("acme/chat-7b")
    page.goto("/models/acme/chat-7b")

    form = page.locator("#op-fallbacks")
    form.get_by_label("Fallbacks").fill("acme/chat-7b")
    form.get_by_role("button", name="Save fallbacks").click()
    # The form is swapped in place with the builder's message on its field.
    expect(page.locator("#op-fallbacks #errors-fallbacks-fallbacks")).to_contain_text(
        "a model cannot fall back to itself")
    expect(page.locator("#op-fallbacks .field.invalid")).to_have_count(1)
    assert "fallbacks" not in StoredModel.objects.get(name="acme/chat-7b").definition

    form = page.locator("#op-fallbacks")
    form.get_by_label("Fallbacks").fill("declared-cpu, llama")
    form.get_by_role("button", name="Save fallbacks").click()
    expect(page.get_by_role("status")).to_contain_text("Fallbacks of acme/chat-7b saved.")
    fallbacks_shown = page.locator("dl.definition dt:has-text('fallbacks') + dd")
    expect(fallbacks_shown).to_have_text("declared-cpu, llama")
    expect(page.locator("#op-fallbacks").get_by_label("Fallbacks")).to_have_value("declared-cpu, llama")


def test_models_table_searches_filters_and_sorts_in_place_with_the_state_in_the_url(as_operator):
    page = as_operator
    for name in ("acme/chat-7b", "acme/chat-70b", "acme/coder-1b"):
        runtime(name)
    runtime("acme/chatty-helper", description="a chat model")
    page.goto("/models/")
    rows = page.locator("#models-table tbody tr")
    expect(rows).to_have_count(6)  # 2 declared + 4 runtime

    page.get_by_role("searchbox", name="Search").press_sequentially("chat")
    expect(rows).to_have_count(3)
    expect(page).to_have_url(re.compile(r"[?&]q=chat\b"))
    expect(page.get_by_role("searchbox", name="Search")).to_be_focused()  # typing goes on

    page.get_by_label("Kind").select_option("runtime")
    expect(page).to_have_url(re.compile(r"kind=runtime"))
    expect(page).to_have_url(re.compile(r"q=chat"))
    expect(rows).to_have_count(3)

    page.get_by_role("searchbox", name="Search").fill("")
    page.get_by_role("searchbox", name="Search").press_sequentially("acme")
    expect(rows).to_have_count(4)

    page.locator("#models-table th a", has_text="Name").click()
    expect(page).to_have_url(re.compile(r"sort=name\b"))
    page.locator("#models-table th a", has_text="Name").click()
    expect(page).to_have_url(re.compile(r"sort=-name\b"))
    expect(page.locator("#models-table th a[aria-sort=descending]")).to_have_text("Name")
    expect(rows.locator("td:first-child code")).to_have_text(
        ["acme/coder-1b", "acme/chatty-helper", "acme/chat-7b", "acme/chat-70b"])
    expect(page).to_have_url(re.compile(r"kind=runtime"))
    expect(page).to_have_url(re.compile(r"q=acme"))

    # The URL is the state: opening it fresh gives the same table.
    page.reload()
    expect(rows.locator("td:first-child code")).to_have_text(
        ["acme/coder-1b", "acme/chatty-helper", "acme/chat-7b", "acme/chat-70b"])
    expect(page.get_by_label("Kind")).to_have_value("runtime")

    page.get_by_role("link", name="acme/chat-70b").click()
    expect(page).to_have_url(re.compile(r"/models/acme/chat-70b$"))
    expect(page.get_by_role("heading", level=1)).to_contain_text("acme/chat-70b")


def test_changing_a_filter_after_sorting_keeps_the_sort(as_operator):
    page = as_operator
    for name in ("acme/a", "acme/b", "acme/c"):
        runtime(name)
    page.goto("/models/")
    page.locator("#models-table th a", has_text="Name").click()
    page.locator("#models-table th a", has_text="Name").click()
    expect(page).to_have_url(re.compile(r"sort=-name\b"))

    page.get_by_label("Kind").select_option("runtime")
    expect(page).to_have_url(re.compile(r"kind=runtime"))
    expect(page.locator("#models-table tbody tr td:first-child code")).to_have_text(["acme/c", "acme/b", "acme/a"])
    expect(page).to_have_url(re.compile(r"sort=-name\b"))


def test_remove_shows_who_depends_on_a_model_and_removes_a_free_one(as_operator):
    page = as_operator
    runtime("acme/base")
    runtime("acme/chat", fallbacks=["acme/base"])

    page.goto("/models/acme/base")
    page.get_by_role("link", name="Remove…").click()
    expect(page).to_have_url(re.compile(r"/models/acme/base/-/remove$"))
    expect(page.locator(".panel.warn")).to_contain_text("Other models depend on it")
    expect(page.locator(".panel.warn")).to_contain_text("acme/chat falls back to it")
    expect(page.get_by_role("button", name=re.compile("^Remove"))).to_have_count(0)

    page.goto("/models/acme/chat")
    page.get_by_role("link", name="Remove…").click()
    expect(page.get_by_text("No model falls back to it")).to_be_visible()
    page.get_by_role("button", name="Remove acme/chat").click()
    expect(page).to_have_url(re.compile(r"/models/$"))
    expect(page.get_by_role("status")).to_contain_text("acme/chat was removed.")
    expect(page.get_by_role("link", name="acme/chat", exact=True)).to_have_count(0)
    expect(page.get_by_role("link", name="acme/base", exact=True)).to_be_visible()
    assert list(StoredModel.objects.values_list("name", flat=True)) == ["acme/base"]


def test_a_viewer_sees_a_runtime_model_without_any_form(page, viewer_user, log_in):
    runtime("acme/chat-7b")
    log_in(page, viewer_user.username)
    page.goto("/models/acme/chat-7b")
    expect(page.get_by_text("Your role can look but not change models.")).to_be_visible()
    expect(page.locator("form.operation")).to_have_count(0)
    expect(page.get_by_role("link", name="Remove…")).to_have_count(0)
