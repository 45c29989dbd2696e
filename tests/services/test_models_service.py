"""Runtime model operations (SPEC §3): what each one refuses, and what it
changes. The model each update returns is the one that will run."""

from __future__ import annotations

import json

import pytest
import yaml

from catalog import builder, selectors
from catalog.builder import CatalogError
from catalog.models import AuditEvent, CatalogVersion, StoredModel
from catalog.services import models as svc
from catalog.services.errors import Conflict, NotFound

pytestmark = pytest.mark.django_db

DECLARED = "declared/llama"
SOURCE = "hf://acme/chat-7b"


def model(name: str, **fields) -> dict:
    return {"name": name, "source": SOURCE, **fields}


def add(name: str, **fields) -> dict:
    return svc.add_model(definition=model(name, **fields), by="alice")


def paths(exc: CatalogError) -> set[str]:
    return {p.path for p in exc.problems}


def counts() -> tuple[int, int, int]:
    return StoredModel.objects.count(), CatalogVersion.objects.count(), AuditEvent.objects.count()


# A pre-add check a deployment could configure (settings.LLMGW_PRE_ADD_CHECK).
def refuse_unpinned_weights(built: dict):
    if "@" not in built["source"]:
        yield "source", "weights must be pinned to a revision (hf://ORG/NAME@REV)"


# --- add ----------------------------------------------------------------------

def test_add_refuses_a_declared_name_and_says_where_to_edit_it():
    with pytest.raises(Conflict) as refused:
        add(DECLARED)
    message = refused.value.message
    assert "declared" in message and "cluster settings" in message and "edit it there" in message
    assert not StoredModel.objects.filter(name=DECLARED).exists()


def test_add_refuses_a_cpu_only_profile_with_no_memory():
    with pytest.raises(CatalogError) as refused:
        add("acme/cpu", profiles=[{"name": "gpu", "gpus": 1}, {"name": "cpu", "gpus": 0, "cpu_cores": 4}])
    assert "profiles.1.min_memory_gb" in paths(refused.value)
    assert not StoredModel.objects.filter(name="acme/cpu").exists()


def test_add_accepts_a_cpu_only_profile_that_declares_its_memory():
    built = add("acme/cpu", profiles=[{"name": "cpu", "gpus": 0, "min_memory_gb": 32, "cpu_cores": 4}])
    assert built["profiles"][0]["min_memory_gb"] == 32
    assert selectors.in_force().catalog.warnings("acme/cpu") == []


def test_add_refuses_what_the_configured_pre_add_check_refuses(settings):
    settings.LLMGW_PRE_ADD_CHECK = f"{__name__}.refuse_unpinned_weights"
    selectors.in_force()
    before = counts()
    with pytest.raises(CatalogError) as refused:
        add("acme/unpinned")
    assert refused.value.by_path("acme/unpinned")["source"] == [
        "weights must be pinned to a revision (hf://ORG/NAME@REV)"]
    assert counts() == before
    assert add("acme/pinned", source="hf://acme/chat-7b@main")["source"] == "hf://acme/chat-7b@main"


def test_default_pre_add_check_refuses_a_source_the_builder_alone_accepts():
    odd = model("acme/odd", source="hf://a/b/c")
    state = selectors.in_force()
    builder.build([*state.settings.declared, odd], engines=state.settings.engines,
                  defaults=state.settings.defaults)  # the schema allows it to load
    with pytest.raises(CatalogError) as refused:
        svc.add_model(definition=odd, by="alice")
    assert "source" in paths(refused.value)
    assert "hf://ORG/NAME" in refused.value.by_path("acme/odd")["source"][0]


def test_add_builds_the_whole_catalog_before_writing_anything():
    selectors.in_force()
    before = counts()
    with pytest.raises(CatalogError) as refused:
        add("acme/bad", fallbacks=["nowhere"], scaling={"min": 3, "max": 1})
    assert {"fallbacks.0", "scaling.max"} <= paths(refused.value)
    assert counts() == before


def test_add_refuses_a_name_an_alias_of_another_model_already_has():
    with pytest.raises(CatalogError) as refused:
        add("llama")
    assert "name" in paths(refused.value)


def test_add_replaces_a_runtime_model_of_the_same_name():
    add("acme/chat", description="first")
    built = add("acme/chat", description="second", owner="team:ml")
    assert built["description"] == "second" and built["owner"] == "team:ml"
    assert StoredModel.objects.filter(name="acme/chat").count() == 1
    assert selectors.in_force().catalog.resolve("acme/chat")["description"] == "second"
    event = AuditEvent.objects.filter(object_id="acme/chat").first()
    assert event.action == "model.replace"
    assert event.before["description"] == "first" and event.after["description"] == "second"


def test_add_returns_the_model_as_built_with_the_cluster_defaults(settings_file):
    document = yaml.safe_load(settings_file.path.read_text())
    settings_file.write({**document, "defaults": {"engine": "sglang", "scaling": {"min": 0, "max": 3}}})
    built = add("acme/chat")
    assert built == {
        "name": "acme/chat", "aliases": [], "description": "", "engine": "sglang", "source": SOURCE,
        "origin": None, "adapters": [],
        "profiles": [{"name": "default", "gpus": 1, "gpu_type": "", "gpu_memory_gb": 0, "min_memory_gb": 0,
                      "cpu_cores": 0}],
        "scaling": {"min": 0, "max": 3}, "class": "", "owner": "", "canary": None, "eval": None,
        "fallbacks": [],
    }
    # Stored as given, so the row keeps following the defaults.
    assert json.loads(StoredModel.objects.get(name="acme/chat").definition) == model("acme/chat")


# --- remove -------------------------------------------------------------------

def test_remove_refuses_a_declared_model_and_says_to_remove_it_in_settings():
    with pytest.raises(Conflict) as refused:
        svc.remove_model(name=DECLARED, by="alice")
    assert "cluster settings" in refused.value.message and "remove it there" in refused.value.message
    assert selectors.in_force().catalog.resolve(DECLARED) is not None


def test_remove_refuses_an_unknown_name():
    with pytest.raises(NotFound):
        svc.remove_model(name="acme/ghost", by="alice")


def test_remove_refuses_a_model_others_fall_back_to_and_names_them():
    add("acme/base")
    add("acme/first", fallbacks=["acme/base"])
    add("acme/second", fallbacks=[DECLARED, "acme/base"])
    with pytest.raises(Conflict) as refused:
        svc.remove_model(name="acme/base", by="alice")
    assert "acme/first" in refused.value.message and "acme/second" in refused.value.message
    assert StoredModel.objects.filter(name="acme/base").exists()


def test_remove_refuses_a_model_another_sends_canary_traffic_to_and_names_it():
    add("acme/candidate")
    add("acme/prod", canary={"model": "acme/candidate", "percent": 10})
    with pytest.raises(Conflict) as refused:
        svc.remove_model(name="acme/candidate", by="alice")
    assert "acme/prod" in refused.value.message and "canary" in refused.value.message


def test_remove_of_an_alias_points_at_the_model():
    add("acme/chat", aliases=["chat"])
    with pytest.raises(NotFound) as refused:
        svc.remove_model(name="chat", by="alice")
    assert "acme/chat" in refused.value.message
    assert StoredModel.objects.filter(name="acme/chat").exists()


def test_remove_of_a_declared_alias_points_at_the_declared_model():
    with pytest.raises((Conflict, NotFound)) as refused:
        svc.remove_model(name="llama", by="alice")
    assert DECLARED in refused.value.message


def test_remove_takes_the_model_out_and_audits_it():
    add("acme/chat")
    svc.remove_model(name="acme/chat", by="alice")
    assert selectors.in_force().catalog.resolve("acme/chat") is None
    assert not StoredModel.objects.filter(name="acme/chat").exists()
    event = AuditEvent.objects.filter(object_id="acme/chat").first()
    assert (event.action, event.actor, event.after) == ("model.remove", "alice", None)
    assert event.before["name"] == "acme/chat"


# --- updates ------------------------------------------------------------------

def test_scale_sets_replicas_and_returns_the_model_as_built():
    add("acme/chat")
    built = svc.scale_model(name="acme/chat", min=0, max=5, by="alice")
    assert built["scaling"] == {"min": 0, "max": 5}
    assert builder.effective_class(built) == "opportunistic"
    assert selectors.in_force().catalog.resolve("acme/chat")["scaling"] == {"min": 0, "max": 5}


def test_scale_refuses_max_below_min():
    add("acme/chat")
    with pytest.raises(CatalogError) as refused:
        svc.scale_model(name="acme/chat", min=4, max=2, by="alice")
    assert "scaling.max" in paths(refused.value)


def test_set_resources_of_one_profile_leaves_the_others():
    add("acme/chat", profiles=[{"name": "big", "gpus": 2}, {"name": "small", "gpus": 1}])
    built = svc.set_resources(name="acme/chat", profile="small", min_memory_gb=24, cpu_cores=6, by="alice")
    big, small = built["profiles"]
    assert (small["min_memory_gb"], small["cpu_cores"]) == (24, 6)
    assert (big["min_memory_gb"], big["cpu_cores"]) == (0, 0)


def test_set_resources_with_no_profile_sets_every_profile():
    add("acme/chat", profiles=[{"name": "big", "gpus": 2}, {"name": "small", "gpus": 1}])
    built = svc.set_resources(name="acme/chat", profile=None, min_memory_gb=8, cpu_cores=2, by="alice")
    assert [(p["min_memory_gb"], p["cpu_cores"]) for p in built["profiles"]] == [(8, 2), (8, 2)]


def test_set_resources_on_the_default_profile_of_a_model_that_names_none():
    add("acme/chat")
    built = svc.set_resources(name="acme/chat", profile="default", min_memory_gb=8, cpu_cores=2, by="alice")
    assert built["profiles"] == [{"name": "default", "gpus": 1, "gpu_type": "", "gpu_memory_gb": 0,
                                  "min_memory_gb": 8, "cpu_cores": 2}]


def test_set_resources_refuses_an_unknown_profile():
    add("acme/chat")
    with pytest.raises(CatalogError) as refused:
        svc.set_resources(name="acme/chat", profile="huge", min_memory_gb=8, cpu_cores=2, by="alice")
    assert paths(refused.value) == {"profile"}


@pytest.mark.parametrize("memory, cores, path", [(-1, 2, "min_memory_gb"), (8, -2, "cpu_cores"),
                                                 (True, 2, "min_memory_gb"), (8, "4", "cpu_cores")])
def test_set_resources_refuses_negative_or_non_whole_values(memory, cores, path):
    add("acme/chat")
    with pytest.raises(CatalogError) as refused:
        svc.set_resources(name="acme/chat", profile=None, min_memory_gb=memory, cpu_cores=cores, by="alice")
    assert paths(refused.value) == {path}


def test_set_class_sets_and_clears_the_class():
    add("acme/chat")
    assert svc.set_class(name="acme/chat", cls="critical", by="alice")["class"] == "critical"
    cleared = svc.set_class(name="acme/chat", cls="", by="alice")
    assert cleared["class"] == "" and builder.effective_class(cleared) == "standard"


def test_set_class_refuses_an_unknown_class():
    add("acme/chat")
    with pytest.raises(CatalogError) as refused:
        svc.set_class(name="acme/chat", cls="gold", by="alice")
    assert paths(refused.value) == {"class"}


def test_set_owner_sets_an_owner_and_makes_it_shared_again():
    add("acme/chat")
    assert svc.set_owner(name="acme/chat", owner="team:ml", by="alice")["owner"] == "team:ml"
    assert svc.set_owner(name="acme/chat", owner="", by="alice")["owner"] == ""


def test_set_owner_refuses_an_owner_outside_the_tenancy_tree():
    add("acme/chat")
    with pytest.raises(CatalogError) as refused:
        svc.set_owner(name="acme/chat", owner="everyone", by="alice")
    assert paths(refused.value) == {"owner"}


def test_set_adapters_replaces_the_adapters():
    add("acme/chat", adapters=[{"name": "old", "source": "s3://bucket/old"}])
    built = svc.set_adapters(name="acme/chat", adapters=[{"name": "sql", "source": "s3://bucket/sql"},
                                                         {"name": "legal", "source": "hf://acme/legal"}], by="alice")
    assert [a["name"] for a in built["adapters"]] == ["sql", "legal"]
    assert set(selectors.in_force().catalog.sources()) >= {"s3://bucket/sql", "hf://acme/legal", SOURCE}
    assert "s3://bucket/old" not in selectors.in_force().catalog.sources()


def test_set_adapters_refuses_a_name_used_twice():
    add("acme/chat")
    with pytest.raises(CatalogError) as refused:
        svc.set_adapters(name="acme/chat", adapters=[{"name": "sql", "source": "s3://bucket/a"},
                                                     {"name": "sql", "source": "s3://bucket/b"}], by="alice")
    assert "adapters.1.name" in paths(refused.value)


def test_set_adapters_runs_the_pre_add_check_on_adapter_weights():
    add("acme/chat")
    with pytest.raises(CatalogError) as refused:
        svc.set_adapters(name="acme/chat", adapters=[{"name": "sql", "source": "hf://a/b/c"}], by="alice")
    assert "adapters.0.source" in paths(refused.value)


def test_set_source_moves_to_other_weights_and_records_their_origin():
    add("acme/chat")
    origin = {"repo": "acme/chat-7b-v2", "revision": "abc123", "digest": "sha256:00", "fetched_at": "2025-01-01"}
    built = svc.set_source(name="acme/chat", source="s3://weights/chat-v2", origin=origin, by="alice")
    assert built["source"] == "s3://weights/chat-v2" and built["origin"] == origin
    assert selectors.in_force().catalog.sources()["s3://weights/chat-v2"] == ["acme/chat"]


def test_set_source_refuses_weights_the_pre_add_check_refuses():
    add("acme/chat")
    with pytest.raises(CatalogError) as refused:
        svc.set_source(name="acme/chat", source="hf://a/b/c", origin=None, by="alice")
    assert "source" in paths(refused.value)
    assert selectors.in_force().catalog.resolve("acme/chat")["source"] == SOURCE


def test_set_canary_sets_changes_and_clears_the_canary():
    add("acme/candidate")
    add("acme/chat")
    built = svc.set_canary(name="acme/chat", canary={"model": "acme/candidate", "percent": 5}, by="alice")
    assert built["canary"] == {"model": "acme/candidate", "percent": 5}
    assert selectors.in_force().catalog.used_by("acme/candidate")["canary_of"] == ["acme/chat"]
    changed = svc.set_canary(name="acme/chat", canary={"model": "acme/candidate", "percent": 50}, by="alice")
    assert changed["canary"]["percent"] == 50
    assert svc.set_canary(name="acme/chat", canary=None, by="alice")["canary"] is None
    assert selectors.in_force().catalog.used_by("acme/candidate")["canary_of"] == []


def test_set_canary_refuses_a_candidate_not_in_the_catalog():
    add("acme/chat")
    with pytest.raises(CatalogError) as refused:
        svc.set_canary(name="acme/chat", canary={"model": "acme/ghost", "percent": 5}, by="alice")
    assert paths(refused.value) == {"canary.model"}


def test_set_eval_sets_and_clears_the_gate():
    add("acme/chat")
    built = svc.set_eval(name="acme/chat", gate={"suite": "mmlu-lite", "min_score": 1}, by="alice")
    assert built["eval"] == {"suite": "mmlu-lite", "min_score": 1.0}
    assert svc.set_eval(name="acme/chat", gate=None, by="alice")["eval"] is None


def test_set_eval_refuses_a_score_outside_zero_to_one():
    add("acme/chat")
    with pytest.raises(CatalogError) as refused:
        svc.set_eval(name="acme/chat", gate={"suite": "mmlu", "min_score": 1.5}, by="alice")
    assert paths(refused.value) == {"eval.min_score"}


def test_set_fallbacks_replaces_the_fallbacks_aliases_included():
    add("acme/small")
    add("acme/chat", fallbacks=["acme/small"])
    built = svc.set_fallbacks(name="acme/chat", fallbacks=["llama", "acme/small"], by="alice")
    assert built["fallbacks"] == ["llama", "acme/small"]
    assert selectors.in_force().catalog.used_by(DECLARED)["fallback_of"] == ["acme/chat"]


def test_set_fallbacks_refuses_the_model_itself():
    add("acme/chat")
    with pytest.raises(CatalogError) as refused:
        svc.set_fallbacks(name="acme/chat", fallbacks=[DECLARED, "acme/chat"], by="alice")
    assert paths(refused.value) == {"fallbacks.1"}


def test_set_fallbacks_refuses_an_unknown_model():
    add("acme/chat")
    with pytest.raises(CatalogError) as refused:
        svc.set_fallbacks(name="acme/chat", fallbacks=["acme/ghost"], by="alice")
    assert paths(refused.value) == {"fallbacks.0"}


def test_set_fallbacks_refuses_a_cycle_through_other_models():
    add("acme/a")
    add("acme/b", fallbacks=["acme/a"])
    add("acme/c", fallbacks=["acme/b"])
    selectors.in_force()
    before = counts()
    with pytest.raises(CatalogError) as refused:
        svc.set_fallbacks(name="acme/a", fallbacks=["acme/c"], by="alice")
    assert any("cycle" in p.message for p in refused.value.problems)
    assert counts() == before
    assert selectors.in_force().catalog.resolve("acme/a")["fallbacks"] == []


def test_set_origin_records_the_origin_only():
    add("acme/chat")
    built = svc.set_origin(name="acme/chat", origin={"repo": "acme/chat-7b", "revision": "r1"})
    assert built["origin"] == {"repo": "acme/chat-7b", "revision": "r1", "digest": "", "fetched_at": ""}
    assert built["source"] == SOURCE


def test_set_origin_leaves_a_declared_model_alone_silently():
    selectors.in_force()
    before = counts()
    assert svc.set_origin(name=DECLARED, origin={"repo": "meta-llama/x"}) is None
    assert counts() == before
    assert selectors.in_force().catalog.resolve(DECLARED)["origin"] is None


DECLARED_REFUSALS = {
    "scale": (lambda n: svc.scale_model(name=n, min=1, max=1, by="alice"), "change its scaling"),
    "resources": (lambda n: svc.set_resources(name=n, profile=None, min_memory_gb=1, cpu_cores=1, by="alice"),
                  "change its resources"),
    "class": (lambda n: svc.set_class(name=n, cls="standard", by="alice"), "change its class"),
    "owner": (lambda n: svc.set_owner(name=n, owner="team:x", by="alice"), "change its owner"),
    "adapters": (lambda n: svc.set_adapters(name=n, adapters=[], by="alice"), "change its adapters"),
    "source": (lambda n: svc.set_source(name=n, source=SOURCE, origin=None, by="alice"), "change its source"),
    "canary": (lambda n: svc.set_canary(name=n, canary=None, by="alice"), "set its canary"),
    "eval": (lambda n: svc.set_eval(name=n, gate=None, by="alice"), "set its eval gate"),
    "fallbacks": (lambda n: svc.set_fallbacks(name=n, fallbacks=[], by="alice"), "change its fallbacks"),
    "update": (lambda n: svc.update_model(name=n, changes={"owner": ""}, by="alice"), "change it"),
}


@pytest.mark.parametrize("operation", sorted(DECLARED_REFUSALS))
def test_updates_refuse_a_declared_model_and_say_to_edit_the_settings(operation):
    call, what = DECLARED_REFUSALS[operation]
    selectors.in_force()
    before = counts()
    with pytest.raises(Conflict) as refused:
        call(DECLARED)
    assert f"{what} there" in refused.value.message and "cluster settings" in refused.value.message
    assert counts() == before


@pytest.mark.parametrize("operation", sorted(DECLARED_REFUSALS))
def test_updates_refuse_a_model_that_was_never_added(operation):
    call, _ = DECLARED_REFUSALS[operation]
    with pytest.raises(NotFound):
        call("acme/ghost")


def test_update_changes_several_fields_in_one_rebuild():
    add("acme/small")
    add("acme/chat")
    selectors.in_force()
    versions = CatalogVersion.objects.count()
    built = svc.update_model(name="acme/chat", changes={"scaling": {"min": 2, "max": 4}, "class": "critical",
                                                         "owner": "project:x", "fallbacks": ["acme/small"]},
                             by="alice")
    assert (built["scaling"], built["class"], built["owner"], built["fallbacks"]) == (
        {"min": 2, "max": 4}, "critical", "project:x", ["acme/small"])
    assert CatalogVersion.objects.count() == versions + 1


def test_update_refuses_fields_it_cannot_change():
    add("acme/chat")
    with pytest.raises(CatalogError) as refused:
        svc.update_model(name="acme/chat", changes={"name": "acme/other", "aliases": ["x"]}, by="alice")
    assert paths(refused.value) == {"name", "aliases"}
