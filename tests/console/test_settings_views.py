"""The Settings screens (SPEC §4, §7): the layered view, editing with a
preview of the impact, one key at a time, history with diffs, rollback, and
what happens when someone else saved first."""

from __future__ import annotations

import html

import pytest
import yaml

from catalog.models import AuditEvent, SettingsVersion
from catalog.services import models as model_services
from catalog.services import settings as settings_services
from tests.conftest import TEST_SETTINGS

pytestmark = pytest.mark.django_db


def text(response) -> str:
    return html.unescape(response.content.decode())

SETTINGS, PREVIEW, SAVE, KEY, HISTORY = "/settings/", "/settings/preview", "/settings/save", "/settings/key", \
    "/settings/history"
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def as_admin(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.fixture
def as_operator(client, operator_user):
    client.force_login(operator_user)
    return client


@pytest.fixture
def as_viewer(client, viewer_user):
    client.force_login(viewer_user)
    return client


def cluster(**changes) -> dict:
    """The test cluster's settings (cluster keys only) with some keys changed."""
    document = {k: v for k, v in TEST_SETTINGS.items() if k not in ("listen", "node_name")}
    document["guard"] = {"policy": "baseline"}
    document.update(changes)
    return document



def newest() -> SettingsVersion:
    return SettingsVersion.objects.order_by("-number").first()


def test_settings_page_shows_each_key_its_value_and_where_it_comes_from(as_viewer):
    page = as_viewer.get(SETTINGS)
    assert page.status_code == 200
    body = text(page)
    assert 'data-key="engines" data-source="store"' in body and "store v1" in body
    assert 'data-key="listen" data-source="file"' in body  # a machine key: this machine's file
    assert "llama.cpp" in body  # values shown as YAML


def test_file_keys_that_differ_from_the_store_are_shown_ignored_with_a_warning(as_viewer, settings_file):
    as_viewer.get(SETTINGS)  # imports the file as version 1
    settings_file.write({**TEST_SETTINGS, "cluster_name": "renamed"})
    body = text(as_viewer.get(SETTINGS))
    row = body.split('data-key="cluster_name" data-source="file" class="ignored" data-ignored="true"', 1)[1]
    assert "differs from the store" in row.split("</tr>", 1)[0]
    engines = body.split('data-key="engines" data-source="file" class="ignored"', 1)[1].split("</tr>", 1)[0]
    assert "differs from the store" not in engines  # ignored, but the same as the store's
    assert 'id="settings-warnings"' in body and "differ from the store and are ignored: cluster_name" in body


def test_a_version_that_does_not_load_is_named_in_the_warnings(as_viewer):
    as_viewer.get(SETTINGS)
    SettingsVersion.objects.create(number=2, document={"engines": "not a list"}, author="hand", parent=1)
    body = text(as_viewer.get(SETTINGS))
    assert "settings version 2 does not load" in body
    assert "version 1 in force" in body


@pytest.mark.parametrize("persona", ["as_viewer", "as_operator"])
def test_readers_get_no_editor_and_403_when_they_post_a_write(persona, request):
    client = request.getfixturevalue(persona)
    page = text(client.get(SETTINGS))
    assert 'id="settings-editor"' not in page and 'id="settings-key-form"' not in page
    assert 'id="settings-readonly"' in page
    history = text(client.get(HISTORY))
    assert 'id="rollback-' not in history
    document = yaml.safe_dump(cluster(cluster_name="hijacked"))
    for url, data in ((SAVE, {"document": document, "base_version": 1}), (PREVIEW, {"document": document,
                      "base_version": 1}), (KEY, {"key": "cluster_name", "value": "x", "base_version": 1,
                                                  "action": "set"}), ("/settings/rollback/1", {"base_version": 1})):
        assert client.post(url, data).status_code == 403, url
    assert client.get("/settings/rollback/1").status_code == 403
    assert SettingsVersion.objects.count() == 1


def test_the_editor_starts_from_the_newest_version_with_peer_tokens_masked(as_admin, settings_file):
    settings_file.write({**TEST_SETTINGS, "federation": {"peers": [
        {"name": "east", "url": "https://east.example", "token": "east-secret-token-value"}]}})
    body = text(as_admin.get(SETTINGS))
    assert 'name="base_version" value="1"' in body
    assert "east-secret-token-value" not in body
    assert "token: '********'" in body or 'token: "********"' in body


def test_preview_puts_each_problem_on_the_document_with_its_path_and_stores_nothing(as_admin):
    as_admin.get(SETTINGS)
    document = cluster()
    document["models"] = [{**document["models"][0], "source": "ftp://nowhere"},
                          {**document["models"][1], "scaling": {"min": 3, "max": 1}}]
    response = as_admin.post(PREVIEW, {"document": yaml.safe_dump(document), "base_version": 1}, **HTMX)
    assert response.status_code == 200  # htmx swaps only 2xx answers
    body = text(response)
    assert 'id="settings-editor-panel"' in body and "<html" not in body  # the editor alone, for htmx
    errors = body.split('id="editor-document_error"', 1)[1].split("</div>", 1)[0]
    assert "models.0.source" in errors and "models.1.scaling" in errors
    assert SettingsVersion.objects.count() == 1


def test_preview_names_the_settings_key_that_is_wrong(as_admin):
    as_admin.get(SETTINGS)
    response = as_admin.post(PREVIEW, {"document": yaml.safe_dump(cluster(defaults={"engine": "nope"})),
                                       "base_version": 1}, **HTMX)
    errors = text(response).split('id="editor-document_error"', 1)[1].split("</div>", 1)[0]
    assert "defaults.engine" in errors and "nope" in errors


def test_preview_of_text_that_is_not_yaml_says_so_on_the_editor(as_admin):
    as_admin.get(SETTINGS)
    response = as_admin.post(PREVIEW, {"document": "engines: [vllm\n", "base_version": 1}, **HTMX)
    assert response.status_code == 200
    assert "not valid YAML" in text(response)


def test_preview_shows_models_added_changed_and_runtime_models_that_would_be_skipped(as_admin):
    as_admin.get(SETTINGS)
    model_services.add_model(definition={"name": "rt/chat", "source": "hf://acme/chat", "fallbacks": ["declared-cpu"]},
                             by="alice")
    document = cluster()
    llama = {**document["models"][0], "class": "standard"}
    document["models"] = [llama, {"name": "declared/new", "source": "hf://acme/new"}]  # declared-cpu is gone
    body = text(as_admin.post(PREVIEW, {"document": yaml.safe_dump(document), "base_version": 1}, **HTMX))
    assert 'id="settings-impact"' in body
    assert "Adds <code>declared/new</code>" in body
    assert "Removes <code>declared-cpu</code>" in body
    assert "Changes <code>declared/llama</code>: class" in body
    assert "would be skipped" in body and "<code>rt/chat</code>" in body
    assert SettingsVersion.objects.count() == 1


def test_save_writes_a_new_version_and_shows_its_impact(as_admin, admin_user):
    as_admin.get(SETTINGS)
    document = cluster()
    document["models"] = [{**document["models"][0], "class": "standard"}, document["models"][1]]
    response = as_admin.post(SAVE, {"document": yaml.safe_dump(document), "base_version": 1,
                                    "comment": "llama is standard now"}, follow=True)
    assert response.status_code == 200
    body = text(response)
    assert "Settings saved as version 2" in body
    assert 'id="settings-result"' in body and "Changes <code>declared/llama</code>: class" in body
    version = newest()
    assert (version.number, version.author, version.comment) == (2, admin_user.username, "llama is standard now")
    assert 'name="base_version" value="2"' in body  # the editor now starts from the new version
    # Reloading the page does not show the result again, nor write again.
    again = text(as_admin.get(SETTINGS))
    assert 'id="settings-result"' not in again and SettingsVersion.objects.count() == 2


def test_save_of_an_invalid_document_shows_the_errors_and_keeps_the_text(as_admin):
    as_admin.get(SETTINGS)
    typed = yaml.safe_dump(cluster(engines=[])) + "# my careful edit\n"
    response = as_admin.post(SAVE, {"document": typed, "base_version": 1})
    assert response.status_code == 400
    body = text(response)
    assert "engines must be a non-empty list" in body
    assert "# my careful edit" in body
    assert SettingsVersion.objects.count() == 1


def test_a_stale_save_keeps_the_text_shows_the_newer_version_and_what_changed(as_admin):
    as_admin.get(SETTINGS)  # the editor is rendered from version 1 ...
    settings_services.set_setting(key="defaults.scaling.max", value=5, base_version=1, by="bob")  # ... bob saves v2
    typed = yaml.safe_dump(cluster(cluster_name="mine")) + "# my careful edit\n"
    response = as_admin.post(SAVE, {"document": typed, "base_version": 1, "comment": "rename"})
    assert response.status_code == 409
    body = text(response)
    assert 'id="settings-conflict"' in body
    assert "Version 2 was saved since you started from version 1" in body and "bob" in body
    assert 'data-key="defaults.scaling.max"' in body  # the diff from v1 to v2
    assert "# my careful edit" in body and "cluster_name: mine" in body  # nothing the user typed is lost
    assert 'name="base_version" value="2"' in body
    assert SettingsVersion.objects.count() == 2
    # Saving again, now knowingly based on version 2, goes through.
    assert as_admin.post(SAVE, {"document": typed, "base_version": 2}).status_code == 302
    assert newest().number == 3 and newest().document["cluster_name"] == "mine"


def test_a_stale_preview_shows_the_conflict_too(as_admin):
    as_admin.get(SETTINGS)
    settings_services.set_setting(key="cluster_name", value="other", base_version=1, by="bob")
    body = text(as_admin.post(PREVIEW, {"document": yaml.safe_dump(cluster()), "base_version": 1}, **HTMX))
    assert "Version 2 was saved since you started from version 1" in body
    assert 'data-key="cluster_name"' in body


def test_one_key_is_set_and_unset(as_admin):
    as_admin.get(SETTINGS)
    response = as_admin.post(KEY, {"key": "defaults.scaling.max", "value": "4", "base_version": 1,
                                   "action": "set"}, follow=True)
    assert "defaults.scaling.max set: settings version 2" in text(response)
    assert newest().document["defaults"]["scaling"]["max"] == 4
    as_admin.post(KEY, {"key": "cluster_name", "base_version": 2, "action": "unset"})
    assert "cluster_name" not in newest().document
    assert list(AuditEvent.objects.filter(action__startswith="settings.").values_list("action", flat=True)[:2]) == \
        ["settings.unset", "settings.set"]


def test_a_key_whose_value_breaks_the_settings_is_refused_on_the_value(as_admin):
    as_admin.get(SETTINGS)
    response = as_admin.post(KEY, {"key": "defaults.engine", "value": "nope", "base_version": 1, "action": "set"})
    assert response.status_code == 400
    body = text(response)
    assert 'id="setting-value_error"' in body
    errors = body.split('id="setting-value_error"', 1)[1].split("</div>", 1)[0]
    assert "defaults.engine" in errors and "nope" in errors
    assert SettingsVersion.objects.count() == 1


def test_unsetting_a_key_that_is_not_set_says_so_on_the_key(as_admin):
    as_admin.get(SETTINGS)
    response = as_admin.post(KEY, {"key": "federation.offer", "base_version": 1, "action": "unset"})
    assert response.status_code == 400
    errors = text(response).split('id="setting-key_error"', 1)[1].split("</div>", 1)[0]
    assert "is not set" in errors


def test_a_stale_key_write_shows_the_newer_version_and_keeps_the_key_and_value(as_admin):
    as_admin.get(SETTINGS)
    settings_services.set_setting(key="cluster_name", value="other", base_version=1, by="bob")
    response = as_admin.post(KEY, {"key": "defaults.scaling.max", "value": "7", "base_version": 1, "action": "set"})
    assert response.status_code == 409
    body = text(response)
    assert 'id="settings-key-conflict"' in body and "Version 2 was saved" in body
    assert 'value="defaults.scaling.max"' in body and ">\n7</textarea>" in body
    assert SettingsVersion.objects.count() == 2


def test_history_lists_versions_and_compares_two_with_peer_tokens_masked(as_viewer):
    as_viewer.get(SETTINGS)
    peers = {"peers": [{"name": "east", "url": "https://east.example", "token": "east-secret-token-value"}]}
    settings_services.set_setting(key="federation", value=peers, base_version=1, by="alice", comment="add east")
    page = as_viewer.get(HISTORY)
    body = text(page)
    assert 'id="settings-version-2"' in body and "add east" in body and "alice" in body
    compared = text(as_viewer.get(HISTORY, {"a": 1, "b": 2}))
    assert 'data-key="federation.peers[east].token"' in compared and "********" in compared
    assert 'data-key="federation.peers[east].url"' in compared
    assert "east-secret-token-value" not in compared
    assert "east-secret-token-value" not in text(as_viewer.get("/settings/versions/2"))


def test_comparing_a_version_that_does_not_exist_says_so(as_viewer):
    as_viewer.get(SETTINGS)
    body = text(as_viewer.get(HISTORY, {"a": 1, "b": 99}))
    assert "no settings version 99" in body


def test_rollback_shows_its_impact_first_and_writes_a_new_version_on_confirm(as_admin):
    as_admin.get(SETTINGS)
    first = newest().document
    document = cluster()
    document["models"] = [{**document["models"][0], "class": "standard"}, document["models"][1]]
    settings_services.replace_settings(document=document, base_version=1, by="bob")
    page = as_admin.get("/settings/rollback/1")
    assert page.status_code == 200
    body = text(page)
    assert "Changes <code>declared/llama</code>: class" in body
    assert 'id="settings-rollback-form"' in body and 'name="base_version" value="2"' in body
    assert SettingsVersion.objects.count() == 2  # looking costs nothing
    response = as_admin.post("/settings/rollback/1", {"base_version": 2, "comment": "back"}, follow=True)
    assert "Rolled back to version 1: settings version 3" in text(response)
    assert newest().number == 3 and newest().document == first
    assert AuditEvent.objects.filter(action="settings.rollback", actor="admin-user").exists()


def test_a_stale_rollback_is_refused_with_what_changed(as_admin):
    as_admin.get(SETTINGS)
    settings_services.set_setting(key="cluster_name", value="two", base_version=1, by="bob")
    settings_services.set_setting(key="cluster_name", value="three", base_version=2, by="carol")
    response = as_admin.post("/settings/rollback/1", {"base_version": 2})
    assert response.status_code == 409
    body = text(response)
    assert "Version 3 was saved since you started from version 2" in body and "carol" in body
    assert 'name="base_version" value="3"' in body
    assert SettingsVersion.objects.count() == 3


def test_rolling_back_to_a_version_that_cannot_load_is_not_offered(as_admin):
    as_admin.get(SETTINGS)
    SettingsVersion.objects.create(number=2, document={"engines": []}, author="hand", parent=1)
    settings_services.replace_settings(document=cluster(cluster_name="fixed"), base_version=2, by="bob")
    body = text(as_admin.get("/settings/rollback/2"))
    assert 'id="rollback-problems"' in body and "engines" in body
    assert 'id="settings-rollback-form"' not in body
