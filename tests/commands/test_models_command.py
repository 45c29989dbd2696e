"""``manage.py models``: reads, add, every update, refusals."""

import getpass
import json

import pytest

from catalog import selectors
from catalog.models import AuditEvent
from catalog.services import models as services

CLI_ACTOR = f"cli:{getpass.getuser()}"

CHAT = {"name": "team/chat", "source": "hf://org/chat", "description": "the team's chat model"}
SMALL = {"name": "team/small", "source": "hf://org/small", "engine": "sglang",
         "scaling": {"min": 0, "max": 1}, "owner": "team:ml"}


@pytest.fixture
def runtime_models(db):
    services.add_model(definition=CHAT, by="tests")
    services.add_model(definition=SMALL, by="tests")


def last_audit(name):
    return AuditEvent.objects.filter(object_type="model", object_id=name).order_by("-id").first()


# --- reads -------------------------------------------------------------------

def test_list_json_has_every_model_with_kind_class_and_warnings(run, runtime_models):
    items = {m["name"]: m for m in run.json("models", "list")}

    assert set(items) == {"declared/llama", "declared-cpu", "team/chat", "team/small"}
    assert items["declared/llama"]["kind"] == "declared"
    assert items["declared/llama"]["effective_class"] == "critical"
    assert items["team/small"]["kind"] == "runtime"
    assert items["team/small"]["effective_class"] == "opportunistic"
    assert items["team/chat"]["engine"] == "vllm"  # the cluster default, applied
    assert items["team/chat"]["warnings"] == []


@pytest.mark.parametrize("args, expected", [
    (["--kind", "runtime"], {"team/chat", "team/small"}),
    (["--kind", "declared"], {"declared/llama", "declared-cpu"}),
    (["--class", "opportunistic"], {"team/small"}),
    (["--owner", "team:ml"], {"team/small"}),
    (["--engine", "llama.cpp"], {"declared-cpu"}),
    (["-q", "TEAM'S CHAT"], {"team/chat"}),
    (["-q", "llama"], {"declared/llama"}),
])
def test_list_filters(run, runtime_models, args, expected):
    assert {m["name"] for m in run.json("models", "list", *args)} == expected


def test_list_table_shows_one_row_per_model_with_replicas(run, runtime_models):
    lines = run("models", "list").splitlines()

    assert lines[0].split() == ["NAME", "KIND", "CLASS", "ENGINE", "OWNER", "REPLICAS", "WARNINGS"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["team/small"] == ["team/small", "runtime", "opportunistic", "sglang", "team:ml", "0-1", "0"]
    assert rows["declared/llama"][1:3] == ["declared", "critical"]
    assert len(rows) == 4


def test_list_says_so_when_nothing_matches(run, runtime_models):
    assert run("models", "list", "-q", "no-such-thing").strip() == "no models match"


def test_show_by_alias_includes_who_uses_it(run, db):
    services.add_model(definition={**CHAT, "fallbacks": ["llama"]}, by="tests")

    shown = run.json("models", "show", "llama")

    assert shown["name"] == "declared/llama"
    assert shown["used_by"] == {"fallback_of": ["team/chat"], "canary_of": []}


def test_show_without_json_prints_yaml(run, runtime_models):
    import yaml

    shown = yaml.safe_load(run("models", "show", "team/chat"))

    assert shown["name"] == "team/chat"
    assert shown["kind"] == "runtime"
    assert shown["scaling"] == {"min": 1, "max": 2}


def test_show_refuses_an_unknown_name(run, db):
    assert "no-such-model" in run.refused("models", "show", "no-such-model")


def test_sources_lists_weights_and_their_models(run, db):
    services.add_model(definition={**CHAT, "adapters": [{"name": "sql", "source": "hf://org/chat"}]}, by="tests")

    sources = {s["source"]: s["models"] for s in run.json("models", "sources")}

    assert sources["hf://org/chat"] == ["team/chat"]
    assert sources["file:///models/phi.gguf"] == ["declared-cpu"]
    assert "team/chat" in run("models", "sources")


def test_skipped_lists_rows_that_do_not_load(run, db):
    from catalog.models import StoredModel

    selectors.settings_in_force()
    # A row that no longer loads (stored before the rule, or edited by hand):
    # the store can hold one, and the CLI must say so rather than crash.
    StoredModel.objects.create(name="broken", definition="{not json")

    skipped = run.json("models", "skipped")

    assert [s["name"] for s in skipped] == ["broken"]
    assert skipped[0]["reason"]
    assert "broken" in run("models", "skipped")
    assert "broken" not in {m["name"] for m in run.json("models", "list")}


# --- add and remove ------------------------------------------------------------

def test_add_from_a_yaml_file_prints_the_model_as_built(run, tmp_path):
    path = tmp_path / "model.yaml"
    path.write_text("name: team/yaml\nsource: hf://org/yaml\nfallbacks: [llama]\n"
                    "origin: {repo: org/yaml, fetched_at: 2024-05-01}\n")

    built = run.json("models", "add", str(path))

    assert built["name"] == "team/yaml"
    assert built["kind"] == "runtime"
    assert built["scaling"] == {"min": 1, "max": 2}  # the cluster's defaults applied
    assert built["profiles"][0]["gpus"] == 1
    assert built["origin"]["fetched_at"] == "2024-05-01"  # a string, as the schema wants, not a date
    assert selectors.in_force().catalog.resolve("team/yaml")["fallbacks"] == ["llama"]
    event = last_audit("team/yaml")
    assert (event.action, event.actor) == ("model.add", CLI_ACTOR)


def test_add_from_stdin(run, db):
    built = run.json("models", "add", "-", stdin=json.dumps(CHAT))

    assert built["name"] == "team/chat"
    assert run.json("models", "show", "team/chat")["description"] == CHAT["description"]


def test_add_records_the_actor_given_with_as(run, db):
    run("models", "add", "-", "--as", "deploy-bot", stdin=json.dumps(CHAT))

    assert last_audit("team/chat").actor == "deploy-bot"


def test_add_refuses_a_declared_name_and_says_it_is_declared(run, db):
    line = run.refused("models", "add", "-", stdin=json.dumps({**CHAT, "name": "declared/llama"}))

    assert "declared/llama" in line and "declared" in line.replace("declared/llama", "")
    assert "settings" in line


def test_add_refuses_a_cpu_only_profile_without_memory_naming_the_field(run, db):
    model = {**CHAT, "profiles": [{"name": "cpu", "gpus": 0}]}

    line = run.refused("models", "add", "-", stdin=json.dumps(model))

    assert line.startswith("refused: profiles.0.min_memory_gb: ")
    assert selectors.in_force().catalog.resolve("team/chat") is None


def test_add_refuses_every_problem_on_one_line(run, db):
    model = {**CHAT, "engine": "nope", "scaling": {"min": 3, "max": 1}}

    line = run.refused("models", "add", "-", stdin=json.dumps(model))

    assert "engine: " in line and "scaling" in line


def test_add_refuses_a_file_that_is_not_json_or_yaml(run, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: [unclosed\n")

    assert "bad.yaml" in run.refused("models", "add", str(path))


def test_add_refuses_a_missing_file(run, tmp_path):
    assert "cannot read" in run.refused("models", "add", str(tmp_path / "nope.json"))


def test_remove_takes_a_runtime_model_out(run, runtime_models):
    assert "team/small" in run("models", "remove", "team/small")

    assert selectors.in_force().catalog.resolve("team/small") is None
    event = last_audit("team/small")
    assert (event.action, event.actor, event.after) == ("model.remove", CLI_ACTOR, None)


def test_remove_refuses_a_model_others_fall_back_to_and_names_them(run, runtime_models):
    services.set_fallbacks(name="team/chat", fallbacks=["team/small"], by="tests")

    line = run.refused("models", "remove", "team/small")

    assert "team/chat" in line
    assert selectors.in_force().catalog.resolve("team/small") is not None


def test_remove_refuses_a_declared_model(run, db):
    assert "declared" in run.refused("models", "remove", "declared-cpu").replace("declared-cpu", "")


def test_remove_refuses_an_unknown_model(run, db):
    assert "ghost" in run.refused("models", "remove", "ghost")


# --- updates -------------------------------------------------------------------

def includes(value, **fields):
    return isinstance(value, dict) and all(value.get(k) == v for k, v in fields.items())


UPDATES = [
    ("model.scale", ["scale", "team/chat", "--min", "0", "--max", "3"], None,
     lambda m: m["scaling"] == {"min": 0, "max": 3} and m["effective_class"] == "opportunistic"),
    ("model.resources", ["resources", "team/chat", "--profile", "default", "--memory-gb", "24", "--cpu-cores", "6"],
     None, lambda m: (m["profiles"][0]["min_memory_gb"], m["profiles"][0]["cpu_cores"]) == (24, 6)),
    ("model.resources", ["resources", "team/chat", "--memory-gb", "12", "--cpu-cores", "2"],
     None, lambda m: (m["profiles"][0]["min_memory_gb"], m["profiles"][0]["cpu_cores"]) == (12, 2)),
    ("model.set_class", ["class", "team/chat", "critical"], None, lambda m: m["class"] == "critical"),
    ("model.set_owner", ["owner", "team/chat", "project:search"], None, lambda m: m["owner"] == "project:search"),
    ("model.set_adapters", ["adapters", "team/chat", "-"], "- {name: sql, source: 'hf://org/sql-lora'}\n",
     lambda m: m["adapters"] == [{"name": "sql", "source": "hf://org/sql-lora"}]),
    ("model.set_source", ["source", "team/chat", "hf://org/chat-v2", "--origin-repo", "org/chat",
                          "--origin-revision", "v2", "--origin-digest", "sha256:abc"], None,
     lambda m: m["source"] == "hf://org/chat-v2"
     and includes(m["origin"], repo="org/chat", revision="v2", digest="sha256:abc")),
    ("model.set_canary", ["canary", "team/chat", "team/small", "--percent", "10"], None,
     lambda m: m["canary"] == {"model": "team/small", "percent": 10}),
    ("model.set_eval", ["eval", "team/chat", "--suite", "mmlu", "--min-score", "0.7"], None,
     lambda m: m["eval"] == {"suite": "mmlu", "min_score": 0.7}),
    ("model.set_fallbacks", ["fallbacks", "team/chat", "llama", "team/small"], None,
     lambda m: m["fallbacks"] == ["llama", "team/small"]),
    ("model.set_origin", ["origin", "team/chat", "--repo", "org/chat", "--fetched-at", "2024-05-01T00:00:00Z"],
     None, lambda m: includes(m["origin"], repo="org/chat", fetched_at="2024-05-01T00:00:00Z")),
]


@pytest.mark.parametrize("action, args, stdin, holds", UPDATES, ids=[u[1][0] + str(i) for i, u in enumerate(UPDATES)])
def test_every_update_changes_the_model_and_audits_the_cli_actor(run, runtime_models, action, args, stdin, holds):
    printed = run.json("models", *args, stdin=stdin)

    shown = run.json("models", "show", "team/chat")
    assert holds(printed), printed
    assert holds(shown), shown
    event = last_audit("team/chat")
    assert (event.action, event.actor) == (action, CLI_ACTOR)


WITH_EVERYTHING = {**CHAT, "class": "critical", "owner": "team:ml", "fallbacks": ["llama"],
                   "canary": {"model": "team/small", "percent": 5}, "eval": {"suite": "mmlu", "min_score": 0.5}}


@pytest.mark.parametrize("args, holds", [
    (["class", "team/chat", "none"], lambda m: m["class"] == "" and m["effective_class"] == "standard"),
    (["class", "team/chat", ""], lambda m: m["class"] == ""),
    (["owner", "team/chat", "shared"], lambda m: m["owner"] == ""),
    (["canary", "team/chat", "--clear"], lambda m: m["canary"] is None),
    (["eval", "team/chat", "--clear"], lambda m: m["eval"] is None),
    (["fallbacks", "team/chat"], lambda m: m["fallbacks"] == []),
], ids=["class-none", "class-empty", "owner-shared", "canary-clear", "eval-clear", "fallbacks-none"])
def test_updates_clear_what_was_set(run, db, args, holds):
    services.add_model(definition=SMALL, by="tests")
    services.add_model(definition=WITH_EVERYTHING, by="tests")

    run("models", *args)

    assert holds(run.json("models", "show", "team/chat"))
    assert last_audit("team/chat").actor == CLI_ACTOR


def test_update_without_json_prints_the_model_as_yaml(run, runtime_models):
    import yaml

    printed = yaml.safe_load(run("models", "scale", "team/chat", "--min", "2", "--max", "4"))

    assert printed["scaling"] == {"min": 2, "max": 4}


@pytest.mark.parametrize("args, expected", [
    (["scale", "team/chat", "--min", "3", "--max", "1"], "scaling"),
    (["resources", "team/chat", "--memory-gb", "-1", "--cpu-cores", "2"], "min_memory_gb"),
    (["resources", "team/chat", "--profile", "h100", "--memory-gb", "1", "--cpu-cores", "2"], "profile: "),
    (["class", "team/chat", "urgent"], "class: "),
    (["owner", "team/chat", "alice"], "owner: "),
    (["source", "team/chat", "ftp://somewhere"], "source: "),
    (["canary", "team/chat", "team/chat", "--percent", "10"], "canary"),
    (["canary", "team/chat", "team/small", "--percent", "100"], "canary.percent: "),
    (["eval", "team/chat", "--suite", "mmlu", "--min-score", "1.5"], "eval.min_score: "),
    (["fallbacks", "team/chat", "team/chat"], "fallbacks.0: "),
    (["fallbacks", "team/chat", "ghost"], "fallbacks.0: "),
])
def test_update_refusals_name_the_field(run, runtime_models, args, expected):
    before = run.json("models", "show", "team/chat")

    assert expected in run.refused("models", *args)
    assert run.json("models", "show", "team/chat") == before


def test_update_refusal_names_the_other_model_a_change_would_break(run, runtime_models):
    services.set_fallbacks(name="team/small", fallbacks=["team/chat"], by="tests")

    line = run.refused("models", "fallbacks", "team/chat", "team/small")

    assert "cycle" in line.lower()


@pytest.mark.parametrize("args", [
    ["canary", "team/chat", "team/small"],
    ["canary", "team/chat", "--percent", "5"],
    ["canary", "team/chat", "team/small", "--percent", "5", "--clear"],
    ["eval", "team/chat", "--suite", "mmlu"],
    ["eval", "team/chat", "--clear", "--suite", "mmlu"],
    ["origin", "team/chat"],
])
def test_incomplete_arguments_are_refused_before_anything_changes(run, runtime_models, args):
    run.refused("models", *args)

    assert AuditEvent.objects.filter(object_id="team/chat", actor=CLI_ACTOR).count() == 0


def test_updates_refuse_a_declared_model_and_say_where_to_edit_it(run, db):
    line = run.refused("models", "scale", "declared/llama", "--min", "0", "--max", "1")

    assert "declared" in line and "settings" in line


def test_updates_through_an_alias_of_a_declared_model_say_it_is_declared(run, runtime_models):
    assert "declared" in run.refused("models", "class", "llama", "critical")


def test_origin_of_a_declared_model_is_left_alone_without_failing(run, db):
    out = run("models", "origin", "declared/llama", "--repo", "org/x")

    assert out == ""
    assert "declared" in run.stderr
    assert selectors.in_force().catalog.resolve("declared/llama")["origin"] is None


def test_a_refusal_from_the_shell_is_one_line_on_stderr_and_exit_status_1(db, capsys, monkeypatch, tmp_path):
    # What a shell user sees: run_from_argv, not call_command. Closing the
    # connections at the end would end the test's transaction.
    from catalog.management.commands.models import Command

    monkeypatch.setattr("django.core.management.base.connections.close_all", lambda: None)
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps({**CHAT, "profiles": [{"name": "cpu", "gpus": 0}]}))

    with pytest.raises(SystemExit) as exit_info:
        Command().run_from_argv(["manage.py", "models", "add", str(path)])

    captured = capsys.readouterr()
    assert exit_info.value.code == 1
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("refused: profiles.0.min_memory_gb: profile 'cpu'")
