"""``manage.py config``: the cluster settings document from the shell."""

import getpass
import json
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from catalog import selectors
from catalog.models import AuditEvent, SettingsVersion
from catalog.services import models as model_services
from catalog.services import settings as settings_services
from tests.conftest import TEST_SETTINGS

CLI_ACTOR = f"cli:{getpass.getuser()}"
PEER = {"name": "east", "url": "https://east.example.com", "token": "east-secret-token"}


@pytest.fixture
def imported(db):
    """Version 1, imported from the test settings file."""
    selectors.settings_in_force()


@pytest.fixture
def editor(monkeypatch, tmp_path):
    """``editor(python_code)``: $EDITOR becomes a script that runs the code
    with ``text`` holding the file's content and writes ``text`` back."""
    def use(code: str, status: int = 0) -> None:
        script = tmp_path / "editor.py"
        script.write_text("import sys\npath = sys.argv[1]\ntext = open(path).read()\n"
                          f"{code}\nopen(path, 'w').write(text)\nsys.exit({status})\n")
        monkeypatch.setenv("EDITOR", f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}")
    return use


def newest():
    return SettingsVersion.objects.order_by("-number").first()


def with_peer(settings_file):
    settings_file.write({**TEST_SETTINGS, "federation": {"peers": [PEER], "offer": "all"}})


# --- show and get -------------------------------------------------------------

def test_show_prints_the_document_in_force_as_yaml_with_its_version(run, db):
    printed = run("config", "show")

    assert printed.splitlines()[0] == "# cluster settings version 1, in force"
    document = yaml.safe_load(printed)
    assert document["cluster_name"] == "test"
    assert document["defaults"] == {"engine": "vllm", "scaling": {"min": 1, "max": 2}}
    assert document["guard"] == {"policy": "baseline"}  # added on import
    assert "listen" not in document  # a machine key stays in the file
    assert run.stderr == ""


def test_show_warns_on_stderr_that_changed_cluster_keys_in_the_file_are_ignored(run, imported, settings_file):
    settings_file.write({**TEST_SETTINGS, "cluster_name": "renamed", "engines": ["vllm"]})

    printed = run("config", "show")

    assert yaml.safe_load(printed)["cluster_name"] == "test"
    warning = run.stderr.strip()
    assert warning.startswith("warning: ")
    assert "cluster_name, engines" in warning and "ignored" in warning
    assert "manage.py config import" in warning


def test_show_names_a_newer_version_that_does_not_load_and_shows_the_one_in_force(run, imported):
    SettingsVersion.objects.create(number=2, document={"engines": "not a list"}, author="by hand", parent=1)

    printed = run("config", "show")

    assert printed.splitlines()[:2] == ["# cluster settings version 1, in force",
                                        "# version 2 is newer but does not load (see the warnings)"]
    assert "settings version 2 does not load" in run.stderr
    assert "engines" in run.stderr


def test_show_json_has_the_version_document_layers_and_warnings(run, imported, settings_file):
    settings_file.write({**TEST_SETTINGS, "cluster_name": "renamed"})

    view = run.json("config", "show")

    assert (view["version"], view["newest_version"]) == (1, 1)
    assert view["document"]["cluster_name"] == "test"
    assert {"key": "node_name", "value": "test-1", "source": "file", "ignored": False} in view["layers"]
    assert {"key": "cluster_name", "value": "renamed", "source": "file", "ignored": True} in view["layers"]
    assert any("cluster_name" in w for w in view["warnings"])


def test_show_and_get_mask_peer_tokens(run, db, settings_file):
    with_peer(settings_file)

    assert PEER["token"] not in run("config", "show")
    assert run("config", "get", "federation.peers.0.token") == "'********'\n"


@pytest.mark.parametrize("key, printed", [
    ("defaults.scaling.max", "2\n"),
    ("cluster_name", "test\n"),
    ("models.1.name", "declared-cpu\n"),
    ("engines", "- vllm\n- llama.cpp\n- sglang\n"),
])
def test_get_prints_a_value_alone_as_yaml(run, db, key, printed):
    assert run("config", "get", key) == printed


def test_get_prints_a_mapping_as_block_yaml(run, db):
    printed = run("config", "get", "defaults")

    assert yaml.safe_load(printed) == {"engine": "vllm", "scaling": {"min": 1, "max": 2}}
    assert "scaling:\n  " in printed


def test_get_json_names_the_key_and_the_version(run, db):
    assert run.json("config", "get", "defaults.scaling") == {"key": "defaults.scaling", "value": {"min": 1, "max": 2},
                                                             "version": 1}


def test_get_refuses_a_key_that_is_not_set(run, db):
    assert "'defaults.nope' is not set" in run.refused("config", "get", "defaults.nope")


# --- set and unset ------------------------------------------------------------

def test_set_parses_the_value_as_yaml_saves_a_version_and_prints_the_impact(run, imported):
    printed = run("config", "set", "defaults.scaling.max", "4", "--comment", "more replicas")

    lines = printed.splitlines()
    assert lines[0] == "saved settings version 2"
    # Both declared models take their scaling from the defaults.
    assert lines[1] == "  models changed: declared-cpu (scaling), declared/llama (scaling)"
    assert newest().document["defaults"]["scaling"] == {"min": 1, "max": 4}
    assert (newest().author, newest().comment, newest().parent) == (CLI_ACTOR, "more replicas", 1)
    assert selectors.in_force().catalog.resolve("llama")["scaling"] == {"min": 1, "max": 4}


def test_set_a_list_in_flow_yaml(run, imported):
    result = run.json("config", "set", "engines", "[vllm, llama.cpp, tgi]", "--as", "ops-bot")

    assert result["version"] == 2
    assert result["document"]["engines"] == ["vllm", "llama.cpp", "tgi"]
    assert result["impact"] == {"added": [], "removed": [], "changed": [], "skipped": [], "restored": []}
    assert AuditEvent.objects.filter(action="settings.set", object_id="2", actor="ops-bot").exists()


def test_set_shows_runtime_models_the_change_skips_and_why(run, imported):
    model_services.add_model(definition={"name": "team/fast", "source": "hf://org/fast", "engine": "sglang"},
                             by="tests")

    printed = run("config", "set", "engines", "[vllm, llama.cpp]")

    assert "runtime model team/fast is skipped" in printed
    assert "sglang" in printed
    assert selectors.in_force().catalog.resolve("team/fast") is None


def test_set_refuses_an_engine_list_a_declared_model_needs_naming_its_field(run, imported):
    line = run.refused("config", "set", "engines", "[vllm, sglang]")

    assert line.startswith("refused: models.1.engine: ")
    assert "llama.cpp" in line
    assert newest().number == 1


@pytest.mark.parametrize("key, value, path", [
    ("defaults.scaling.max", "0", "defaults.scaling.max: "),
    ("defaults.engine", "tgi", "defaults.engine: "),
    ("colour", "blue", "colour: unknown key 'colour'"),
    ("listen", "0.0.0.0:80", "listen: 'listen' is a machine key"),
])
def test_set_refusals_name_the_key_that_is_wrong(run, imported, key, value, path):
    line = run.refused("config", "set", key, value)

    assert line.startswith(f"refused: {path}")
    assert newest().number == 1


def test_set_refuses_a_value_that_is_not_yaml_naming_the_key(run, imported):
    line = run.refused("config", "set", "engines", "[vllm, sglang")

    assert line.startswith("refused: engines: the value is neither JSON nor YAML")
    assert newest().number == 1


def test_set_based_on_a_stale_version_is_refused_and_names_the_newer_one(run, imported):
    run("config", "set", "defaults.scaling.max", "3")

    line = run.refused("config", "set", "defaults.scaling.max", "4", "--base", "1")

    assert "version 2 is the newest" in line
    assert "manage.py config history 2 --diff 1" in line
    assert newest().number == 2
    assert newest().document["defaults"]["scaling"]["max"] == 3


def test_set_with_the_newest_base_saves(run, imported):
    run("config", "set", "defaults.scaling.max", "3")

    assert run.json("config", "set", "defaults.scaling.max", "4", "--base", "2")["version"] == 3


def test_set_refuses_a_base_that_never_existed(run, imported):
    assert "no settings version 9" in run.refused("config", "set", "cluster_name", "x", "--base", "9")


def test_a_write_that_lands_between_the_read_and_the_write_is_not_undone(run, imported, monkeypatch):
    # Without --base the command reads the newest version, then writes
    # based on it: another admin's write in between must win, not vanish.
    original = settings_services.set_setting

    def someone_else_first(**kwargs):
        original(key="cluster_name", value="theirs", base_version=1, by="someone-else")
        return original(**kwargs)

    monkeypatch.setattr(settings_services, "set_setting", someone_else_first)

    line = run.refused("config", "set", "cluster_name", "mine")

    assert "version 2 is the newest" in line
    assert newest().number == 2 and newest().document["cluster_name"] == "theirs"


def test_unset_removes_a_key_and_saves_a_version(run, imported):
    printed = run("config", "unset", "models.1")

    assert printed.splitlines() == ["saved settings version 2", "  models removed: declared-cpu"]
    assert [m["name"] for m in newest().document["models"]] == ["declared/llama"]


def test_unset_refuses_a_key_that_is_not_set(run, imported):
    line = run.refused("config", "unset", "defaults.nope")

    assert line == "refused: 'defaults.nope' is not set"
    assert newest().number == 1


# --- edit ---------------------------------------------------------------------

def test_edit_shows_the_changes_and_impact_then_saves_when_answered_yes(run, imported, editor):
    editor("text = text.replace('max: 2', 'max: 5')")

    printed = run("config", "edit", "--comment", "bigger", stdin="y\n")

    assert "  ~ defaults.scaling.max: 2 -> 5" in printed
    assert "models changed: declared-cpu (scaling), declared/llama (scaling)" in printed
    assert "Save as version 2? [y/N]" in printed
    assert printed.rstrip().endswith("saved settings version 2")
    assert newest().document["defaults"]["scaling"]["max"] == 5
    assert newest().comment == "bigger"


def test_edit_answered_no_saves_nothing(run, imported, editor):
    editor("text = text.replace('max: 2', 'max: 5')")

    printed = run("config", "edit", stdin="n\n")

    assert "not saved" in printed
    assert newest().number == 1


def test_edit_with_yes_does_not_ask_and_json_prints_only_the_result(run, imported, editor):
    editor("text = text.replace('cluster_name: test', 'cluster_name: prod')")

    result = run.json("config", "edit", "--yes")

    assert (result["version"], result["document"]["cluster_name"]) == (2, "prod")
    assert result["impact"]["changed"] == []
    assert "Save as" not in run.stderr


def test_edit_without_a_change_says_so_and_saves_nothing(run, imported, editor):
    editor("text = text + '\\n# just a comment\\n'")

    assert run("config", "edit").strip() == "no change; nothing saved"
    assert newest().number == 1


def test_edit_refuses_a_document_that_does_not_validate_naming_the_key_and_keeping_the_edit(run, imported, editor):
    editor("text = text.replace('engine: vllm', 'engine: tgi', 1)")

    line = run.refused("config", "edit", "--yes")

    assert line.startswith("refused: defaults.engine: ")
    kept = Path(line.rsplit("your edit is kept in ", 1)[1].rstrip(")"))
    assert "engine: tgi" in kept.read_text()
    kept.unlink()
    assert newest().number == 1


def test_edit_refuses_what_is_not_yaml(run, imported, editor):
    editor("text = text + '\\nmodels: [unclosed\\n'")

    line = run.refused("config", "edit", "--yes")

    assert "neither JSON nor YAML" in line
    Path(line.rsplit("your edit is kept in ", 1)[1].rstrip(")")).unlink()


def test_edit_refuses_when_the_editor_fails(run, imported, editor):
    editor("text = text.replace('max: 2', 'max: 5')", status=3)

    assert "exited with status 3" in run.refused("config", "edit", "--yes")
    assert newest().number == 1


def test_edit_without_an_answer_on_stdin_is_refused_not_saved(run, imported, editor):
    editor("text = text.replace('max: 2', 'max: 5')")

    assert "give --yes" in run.refused("config", "edit", stdin="")
    assert newest().number == 1


def test_edit_keeps_the_peer_tokens_it_shows_masked(run, db, settings_file, editor):
    with_peer(settings_file)
    editor("assert 'east-secret-token' not in text\ntext = text.replace('cluster_name: test', 'cluster_name: prod')")

    run("config", "edit", "--yes")

    assert newest().document["cluster_name"] == "prod"
    assert newest().document["federation"]["peers"][0]["token"] == PEER["token"]


def test_edit_based_on_a_stale_version_is_refused_before_the_editor_opens(run, imported, editor):
    run("config", "set", "cluster_name", "other")
    editor("raise SystemExit('the editor must not open')")

    assert "version 2 is the newest" in run.refused("config", "edit", "--base", "1")


# --- history --------------------------------------------------------------------

def test_history_lists_versions_newest_first_with_author_state_and_comment(run, imported):
    run("config", "set", "defaults.scaling.max", "4", "--as", "alice", "--comment", "more")

    lines = run("config", "history").splitlines()

    assert lines[0].split() == ["VERSION", "AUTHOR", "TIME", "STATE", "COMMENT"]
    assert lines[1].split()[:2] == ["2", "alice"]
    assert lines[1].split()[-3:] == ["in", "force", "more"]
    assert lines[2].split()[:2] == ["1", "system"]
    assert "imported from" in lines[2]


def test_history_json_parses_and_marks_a_version_that_does_not_load(run, imported):
    SettingsVersion.objects.create(number=2, document={"engines": []}, author="by hand", parent=1)

    items = run.json("config", "history")

    assert [(i["number"], i["in_force"], i["loads"]) for i in items] == [(2, False, False), (1, True, True)]
    assert items[1]["created_at"].startswith("20") and "T" in items[1]["created_at"]


def test_history_diff_lists_key_level_changes(run, imported):
    run("config", "set", "defaults.scaling.max", "4")
    run("config", "set", "engines", "[vllm, llama.cpp]")

    printed = run("config", "history", "3", "--diff", "1")

    assert printed.splitlines()[1:] == [
        "changes from version 1:",
        "  ~ defaults.scaling.max: 2 -> 4",
        '  ~ engines: ["vllm", "llama.cpp", "sglang"] -> ["vllm", "llama.cpp"]',
    ]
    diff = run.json("config", "history", "3", "--diff", "1")["diff"]
    assert diff["base"] == 1
    assert {c["key"] for c in diff["changes"]} == {"defaults.scaling.max", "engines"}


def test_history_of_one_version_shows_its_document(run, imported):
    run("config", "set", "cluster_name", "other", "--comment", "rename")

    printed = run("config", "history", "2")

    assert printed.splitlines()[0].startswith(f"version 2 by {CLI_ACTOR} at ")
    assert printed.splitlines()[0].endswith(": rename")
    assert yaml.safe_load(printed)["cluster_name"] == "other"


@pytest.mark.parametrize("args, expected", [
    (["7"], "no settings version 7"),
    (["1", "--diff", "7"], "no settings version 7"),
    (["--diff", "1"], "history N --diff M"),
])
def test_history_refusals(run, imported, args, expected):
    assert expected in run.refused("config", "history", *args)


# --- rollback -------------------------------------------------------------------

def test_rollback_shows_the_impact_asks_and_saves_a_new_version_with_the_old_content(run, imported):
    run("config", "set", "defaults.scaling.max", "4")

    printed = run("config", "rollback", "1", stdin="yes\n")

    assert "roll back to the content of version 1:" in printed
    assert "  ~ defaults.scaling.max: 4 -> 2" in printed
    assert "models changed: declared-cpu (scaling), declared/llama (scaling)" in printed
    assert "Save as version 3? [y/N]" in printed
    assert newest().number == 3
    assert newest().document == SettingsVersion.objects.get(number=1).document
    assert newest().comment == "rollback to v1"


def test_rollback_answered_no_saves_nothing(run, imported):
    run("config", "set", "defaults.scaling.max", "4")

    run("config", "rollback", "1", stdin="n\n")

    assert newest().number == 2


def test_rollback_with_yes_and_json(run, imported):
    run("config", "set", "cluster_name", "other")

    result = run.json("config", "rollback", "1", "--yes")

    assert (result["version"], result["document"]["cluster_name"]) == (3, "test")


def test_rollback_to_the_same_content_saves_nothing(run, imported):
    assert "no change" in run("config", "rollback", "1", "--yes")
    assert newest().number == 1


def test_rollback_refuses_a_version_that_does_not_load(run, imported):
    SettingsVersion.objects.create(number=2, document={"engines": []}, author="by hand", parent=1)
    assert run.json("config", "rollback", "1", "--yes")["version"] == 3  # the way out of a bad version

    assert run.refused("config", "rollback", "2", "--yes").startswith("refused: engines: ")
    assert newest().number == 3


def test_rollback_refuses_an_unknown_version(run, imported):
    assert run.refused("config", "rollback", "9", "--yes") == "refused: no settings version 9"


# --- import ---------------------------------------------------------------------

def test_import_saves_a_files_cluster_keys_as_a_new_version(run, imported, tmp_path):
    path = tmp_path / "new.yaml"
    path.write_text(yaml.safe_dump({**TEST_SETTINGS, "listen": "0.0.0.0:9000", "cluster_name": "prod",
                                    "models": TEST_SETTINGS["models"][:1]}))

    printed = run("config", "import", str(path), "--yes")

    assert f"import the cluster keys of {path}:" in printed
    assert "  - models[declared-cpu].engine" in printed
    assert "models removed: declared-cpu" in printed
    assert printed.rstrip().endswith("saved settings version 2")
    assert newest().document["cluster_name"] == "prod"
    assert "listen" not in newest().document
    assert newest().comment == f"imported from {path}"


def test_import_refuses_a_file_with_a_bad_machine_key_before_asking(run, imported, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**TEST_SETTINGS, "listen": "everywhere", "cluster_name": "prod"}))

    assert run.refused("config", "import", str(path)).startswith("refused: listen: ")
    assert newest().number == 1


def test_import_refuses_a_missing_file(run, imported, tmp_path):
    assert "no such settings file" in run.refused("config", "import", str(tmp_path / "nope.yaml"))


def test_import_refuses_a_file_that_is_not_yaml(run, imported, tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("models: [unclosed\n")

    assert "cannot be read" in run.refused("config", "import", str(path), "--yes")


def test_import_of_the_file_already_in_force_saves_nothing(run, imported, settings_file):
    assert "no change" in run("config", "import", str(settings_file.path), "--yes")
    assert newest().number == 1


def test_a_refused_write_from_the_shell_is_one_line_and_exit_status_1(imported, capsys, monkeypatch):
    from catalog.management.commands.config import Command

    # Closing the connections at the end would end the test's transaction.
    monkeypatch.setattr("django.core.management.base.connections.close_all", lambda: None)

    with pytest.raises(SystemExit) as info:
        Command().run_from_argv(["manage.py", "config", "set", "defaults.scaling.max", "0"])

    captured = capsys.readouterr()
    assert info.value.code == 1
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("refused: defaults.scaling.max: ")


def test_json_output_of_every_read_parses(run, imported):
    for args in (["show"], ["get", "engines"], ["history"], ["history", "1"]):
        json.loads(run("config", *args, "--json"))
