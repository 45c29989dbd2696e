"""One model's fields (SPEC §2.2): each rule, each default, each path."""

import datetime
import math

import pytest

from catalog.builder import CatalogError, add_refusals, build, effective_class

ENGINES = ("vllm", "llama.cpp", "sglang")


def build_one(defaults=None, engines=ENGINES, **fields):
    """The model ``m`` as built, with the other models it needs around it."""
    fields.setdefault("name", "m")
    fields.setdefault("source", "hf://org/m")
    others = [{"name": "other", "aliases": ["other-alias"], "source": "hf://org/other"}]
    catalog = build([fields, *others], engines=engines, defaults=defaults)
    return catalog.resolve(fields["name"])


def problems_of(models, defaults=None, engines=ENGINES):
    with pytest.raises(CatalogError) as info:
        build(models, engines=engines, defaults=defaults)
    return info.value.problems


def refused(defaults=None, engines=ENGINES, **fields):
    """{path: message} of what is wrong with model ``m``."""
    fields.setdefault("name", "m")
    fields.setdefault("source", "hf://org/m")
    others = [{"name": "other", "aliases": ["other-alias"], "source": "hf://org/other"}]
    problems = problems_of([fields, *others], defaults=defaults, engines=engines)
    out = {}
    for p in problems:
        assert p.model == fields["name"] or not isinstance(fields["name"], str) or not fields["name"], p
        out.setdefault(p.path, []).append(p.message)
    return out


def test_a_minimal_model_comes_back_with_every_default_applied():
    assert build_one() == {
        "name": "m", "aliases": [], "description": "", "engine": "vllm", "source": "hf://org/m",
        "origin": None, "adapters": [],
        "profiles": [{"name": "default", "gpus": 1, "gpu_type": "", "gpu_memory_gb": 0, "min_memory_gb": 0,
                      "cpu_cores": 0}],
        "scaling": {"min": 1, "max": 1}, "class": "", "owner": "", "canary": None, "eval": None,
        "fallbacks": [],
    }


def test_explicit_nulls_take_the_defaults():
    m = build_one(aliases=None, description=None, engine=None, origin=None, adapters=None, profiles=None,
                  scaling=None, owner=None, canary=None, eval=None, fallbacks=None)
    assert m == build_one()


# --- name ----------------------------------------------------------------------

def test_a_model_without_a_name_is_refused_at_name():
    problems = problems_of([{"source": "hf://org/m"}])
    assert [p.path for p in problems] == ["name"]


@pytest.mark.parametrize("name", ["", "a b", "/a", "a/", "a//b", ".", "..", "-", "a/./b", "a/../b", "a/-/b", "a" * 201, 7])
def test_a_model_with_an_invalid_name_is_refused_at_name(name):
    problems = problems_of([{"name": name, "source": "hf://org/m"}])
    assert [p.path for p in problems] == ["name"]


def test_a_model_without_a_usable_name_is_labelled_by_its_position():
    problems = problems_of([{"name": "ok", "source": "hf://org/ok"}, {"name": 7, "source": "hf://org/m"}])
    assert [(p.model, p.path) for p in problems] == [("#1", "name")]


def test_a_model_with_an_invalid_name_is_labelled_by_what_it_was_called():
    problems = problems_of([{"name": "a b", "source": "hf://org/m"}])
    assert [(p.model, p.path) for p in problems] == [("a b", "name")]


def test_a_name_of_200_characters_is_accepted():
    assert build_one(name="n" * 200)["name"] == "n" * 200


# --- aliases -------------------------------------------------------------------

def test_aliases_are_kept_in_order():
    assert build_one(aliases=["m-latest", "m:7b"])["aliases"] == ["m-latest", "m:7b"]


def test_a_model_resolves_by_each_of_its_aliases():
    catalog = build([{"name": "m", "aliases": ["x", "y"], "source": "hf://org/m"}], engines=ENGINES)
    assert catalog.resolve("x")["name"] == catalog.resolve("y")["name"] == "m"


@pytest.mark.parametrize("alias", ["", "a b", "/a", "a/", "a//b", ".", "..", "-", "a/-/b", "a" * 201, 3, None])
def test_an_alias_follows_the_name_rule(alias):
    assert list(refused(aliases=["fine", alias])) == ["aliases.1"]


def test_an_alias_repeating_the_name_is_refused():
    assert list(refused(aliases=["m"])) == ["aliases.0"]


def test_an_alias_listed_twice_is_refused_at_its_second_position():
    assert list(refused(aliases=["x", "y", "x"])) == ["aliases.2"]


def test_aliases_that_are_not_a_list_are_refused():
    assert list(refused(aliases="m-latest")) == ["aliases"]


# --- description ---------------------------------------------------------------

def test_a_description_of_2000_characters_is_accepted():
    assert build_one(description="d" * 2000)["description"] == "d" * 2000


def test_a_description_longer_than_2000_characters_is_refused():
    assert list(refused(description="d" * 2001)) == ["description"]


def test_a_description_that_is_not_a_string_is_refused():
    assert list(refused(description=["text"])) == ["description"]


def test_a_description_keeps_non_ascii_text():
    assert build_one(description="modèle 日本語 🦙")["description"] == "modèle 日本語 🦙"


def test_a_description_that_cannot_be_written_as_utf8_is_refused_not_a_broken_catalog():
    # A lone surrogate decodes from JSON ("\ud800") but has no UTF-8 form:
    # a catalog holding it has no canonical document and no digest.
    try:
        catalog = build([{"name": "m", "source": "hf://org/m", "description": "bad \ud800 text"}], engines=ENGINES)
    except CatalogError as exc:
        assert [p.path for p in exc.problems] == ["description"]
        return
    catalog.document()


# --- engine --------------------------------------------------------------------

def test_the_engine_defaults_to_vllm():
    assert build_one()["engine"] == "vllm"


def test_the_engine_defaults_to_the_settings_default_engine():
    assert build_one(defaults={"engine": "sglang"})["engine"] == "sglang"


def test_an_empty_engine_takes_the_default():
    assert build_one(engine="", defaults={"engine": "llama.cpp"})["engine"] == "llama.cpp"


def test_an_explicit_engine_of_the_cluster_is_kept():
    assert build_one(engine="llama.cpp", defaults={"engine": "sglang"})["engine"] == "llama.cpp"


def test_an_engine_the_cluster_does_not_run_is_refused():
    problems = refused(engine="tgi")
    assert list(problems) == ["engine"]
    assert "tgi" in problems["engine"][0]


def test_the_default_engine_must_be_one_the_cluster_runs():
    problems = problems_of([{"name": "m", "source": "hf://org/m"}], engines=("sglang",))
    assert [(p.model, p.path) for p in problems] == [("m", "engine")]


def test_an_engine_that_is_not_a_string_is_refused():
    assert list(refused(engine=1)) == ["engine"]


# --- source --------------------------------------------------------------------

def test_a_local_model_without_a_source_is_refused():
    problems = problems_of([{"name": "m"}])
    assert [(p.model, p.path) for p in problems] == [("m", "source")]


@pytest.mark.parametrize("source", [
    "hf://org/m", "s3://bucket/m", "gs://bucket/m", "oci://registry.example.com/m:1", "file:///models/m",
    "https://weights.example.com/m",
])
def test_a_source_of_each_scheme_is_accepted(source):
    assert build_one(source=source)["source"] == source


@pytest.mark.parametrize("source", ["ftp://host/m", "org/m", "hf://", "hf://org/m m", 5, ""])
def test_a_source_that_is_not_a_weights_uri_is_refused(source):
    assert list(refused(source=source)) == ["source"]


# --- origin --------------------------------------------------------------------

def test_the_origin_defaults_to_null():
    assert build_one()["origin"] is None


def test_origin_fields_are_all_optional_strings():
    assert build_one(origin={"repo": "meta-llama/Llama"})["origin"] == {
        "repo": "meta-llama/Llama", "revision": "", "digest": "", "fetched_at": ""}


def test_a_full_origin_is_kept():
    origin = {"repo": "r", "revision": "abc123", "digest": "sha256:00", "fetched_at": "2025-01-01T00:00:00Z"}
    assert build_one(origin=origin)["origin"] == origin


def test_an_origin_field_that_is_not_a_string_is_refused():
    assert list(refused(origin={"revision": 3})) == ["origin.revision"]


def test_an_origin_that_is_not_an_object_is_refused():
    assert list(refused(origin="hf")) == ["origin"]


# --- adapters ------------------------------------------------------------------

def test_adapters_default_to_none():
    assert build_one()["adapters"] == []


def test_adapters_with_unique_names_and_uri_sources_are_kept():
    adapters = [{"name": "sql", "source": "hf://org/sql-lora"}, {"name": "chat", "source": "s3://bucket/chat"}]
    assert build_one(adapters=adapters)["adapters"] == adapters


def test_an_adapter_name_used_twice_in_a_model_is_refused():
    adapters = [{"name": "sql", "source": "hf://org/a"}, {"name": "sql", "source": "hf://org/b"}]
    assert list(refused(adapters=adapters)) == ["adapters.1.name"]


def test_the_same_adapter_name_in_two_models_is_accepted():
    adapter = [{"name": "sql", "source": "hf://org/sql"}]
    catalog = build([{"name": "a", "source": "hf://org/a", "adapters": adapter},
                     {"name": "b", "source": "hf://org/b", "adapters": adapter}], engines=ENGINES)
    assert len(catalog) == 2


def test_an_adapter_source_must_be_a_weights_uri():
    assert list(refused(adapters=[{"name": "sql", "source": "ftp://x/y"}])) == ["adapters.0.source"]


def test_an_adapter_without_a_source_is_refused():
    assert list(refused(adapters=[{"name": "sql"}])) == ["adapters.0.source"]


def test_an_adapter_name_follows_the_name_rule():
    assert list(refused(adapters=[{"name": "a b", "source": "hf://org/a"}])) == ["adapters.0.name"]


def test_an_adapter_that_is_not_an_object_is_refused():
    assert list(refused(adapters=["hf://org/a"])) == ["adapters.0"]


def test_adapters_that_are_not_a_list_are_refused():
    assert list(refused(adapters={"name": "sql", "source": "hf://org/a"})) == ["adapters"]


# --- profiles ------------------------------------------------------------------

def test_the_default_profile_is_one_gpu_named_default():
    (profile,) = build_one()["profiles"]
    assert profile["name"] == "default" and profile["gpus"] == 1


def test_an_empty_profile_list_takes_the_default_profile():
    assert build_one(profiles=[])["profiles"] == build_one()["profiles"]


def test_a_profile_counts_default_to_one_gpu_and_zero_of_the_rest():
    (profile,) = build_one(profiles=[{"name": "p"}])["profiles"]
    assert profile == {"name": "p", "gpus": 1, "gpu_type": "", "gpu_memory_gb": 0, "min_memory_gb": 0,
                       "cpu_cores": 0}


def test_a_full_profile_is_kept():
    profile = {"name": "h100", "gpus": 2, "gpu_type": "H100", "gpu_memory_gb": 80, "min_memory_gb": 64,
               "cpu_cores": 16}
    assert build_one(profiles=[profile])["profiles"] == [profile]


def test_zero_gpus_means_cpu_only_and_is_accepted():
    (profile,) = build_one(profiles=[{"name": "cpu", "gpus": 0, "min_memory_gb": 16}])["profiles"]
    assert profile["gpus"] == 0


@pytest.mark.parametrize("field", ["gpus", "gpu_memory_gb", "min_memory_gb", "cpu_cores"])
def test_a_negative_profile_count_is_refused(field):
    assert list(refused(profiles=[{"name": "p", field: -1}])) == [f"profiles.0.{field}"]


@pytest.mark.parametrize("field", ["gpus", "gpu_memory_gb", "min_memory_gb", "cpu_cores"])
@pytest.mark.parametrize("value", [True, False, 1.5, 2.0, "2", None, [1]], ids=repr)
def test_a_profile_count_must_be_a_whole_number_and_bools_are_not(field, value):
    assert list(refused(profiles=[{"name": "p", field: value}])) == [f"profiles.0.{field}"]


def test_profile_names_are_unique_within_a_model():
    assert list(refused(profiles=[{"name": "p"}, {"name": "q"}, {"name": "p"}])) == ["profiles.2.name"]


@pytest.mark.parametrize("name", [None, "", 3])
def test_a_profile_needs_a_name(name):
    profile = {"gpus": 1} if name is None else {"name": name}
    assert list(refused(profiles=[profile])) == ["profiles.0.name"]


def test_a_gpu_type_that_is_not_a_string_is_refused():
    assert list(refused(profiles=[{"name": "p", "gpu_type": 100}])) == ["profiles.0.gpu_type"]


def test_a_profile_that_is_not_an_object_is_refused():
    assert list(refused(profiles=["default"])) == ["profiles.0"]


def test_profiles_that_are_not_a_list_are_refused():
    assert list(refused(profiles={"name": "p"})) == ["profiles"]


# --- scaling -------------------------------------------------------------------

def test_scaling_defaults_to_one_replica():
    assert build_one()["scaling"] == {"min": 1, "max": 1}


def test_scaling_defaults_to_the_settings_default_scaling():
    assert build_one(defaults={"scaling": {"min": 0, "max": 4}})["scaling"] == {"min": 0, "max": 4}


def test_a_partial_scaling_takes_the_rest_from_the_settings_defaults():
    defaults = {"scaling": {"min": 1, "max": 2}}
    assert build_one(scaling={"max": 5}, defaults=defaults)["scaling"] == {"min": 1, "max": 5}
    assert build_one(scaling={"min": 0}, defaults=defaults)["scaling"] == {"min": 0, "max": 2}


def test_a_partial_scaling_takes_the_rest_from_one_replica_without_settings_defaults():
    assert build_one(scaling={"max": 3})["scaling"] == {"min": 1, "max": 3}
    assert build_one(scaling={"min": 0})["scaling"] == {"min": 0, "max": 1}


def test_scaling_may_go_to_zero_replicas():
    assert build_one(scaling={"min": 0, "max": 1})["scaling"] == {"min": 0, "max": 1}


def test_a_negative_scaling_min_is_refused():
    assert list(refused(scaling={"min": -1, "max": 1})) == ["scaling.min"]


def test_a_scaling_max_below_one_is_refused():
    assert "scaling.max" in refused(scaling={"min": 0, "max": 0})


def test_a_scaling_max_below_min_is_refused_at_max():
    problems = refused(scaling={"min": 3, "max": 2})
    assert list(problems) == ["scaling.max"]


def test_a_scaling_min_above_the_default_max_is_refused():
    assert list(refused(scaling={"min": 5}, defaults={"scaling": {"min": 1, "max": 2}})) == ["scaling.max"]


@pytest.mark.parametrize("value", [True, 1.0, "2", None], ids=repr)
def test_scaling_counts_must_be_whole_numbers(value):
    assert list(refused(scaling={"min": 1, "max": value})) == ["scaling.max"]


def test_scaling_that_is_not_an_object_is_refused():
    assert list(refused(scaling=[1, 2])) == ["scaling"]


# --- class ---------------------------------------------------------------------

@pytest.mark.parametrize("cls", ["", "critical", "standard", "opportunistic"])
def test_a_class_is_empty_or_critical_standard_or_opportunistic(cls):
    assert build_one(**{"class": cls})["class"] == cls


@pytest.mark.parametrize("cls", ["Critical", "best-effort", "gold", 1])
def test_another_class_is_refused(cls):
    assert list(refused(**{"class": cls})) == ["class"]


def test_the_effective_class_is_the_class_when_set():
    assert effective_class(build_one(scaling={"min": 0, "max": 1}, **{"class": "critical"})) == "critical"


def test_the_effective_class_is_standard_when_a_replica_must_always_run():
    assert effective_class(build_one(scaling={"min": 1, "max": 2})) == "standard"


def test_the_effective_class_is_opportunistic_when_the_model_may_scale_to_zero():
    assert effective_class(build_one(scaling={"min": 0, "max": 2})) == "opportunistic"


def test_the_effective_class_follows_the_default_scaling():
    assert effective_class(build_one(defaults={"scaling": {"min": 0, "max": 1}})) == "opportunistic"


def test_a_federated_model_has_no_effective_class_here():
    catalog = build([{"name": "peer-a/m", "peer": "peer-a"}], engines=ENGINES)
    assert catalog.effective_class("peer-a/m") is None


# --- owner ---------------------------------------------------------------------

@pytest.mark.parametrize("owner", ["", "org:acme", "team:ml-infra", "project:chat.v2"])
def test_an_owner_is_shared_or_an_org_team_or_project(owner):
    assert build_one(owner=owner)["owner"] == owner


@pytest.mark.parametrize("owner", ["acme", "user:bob", "org:", "team:a b", 7])
def test_an_owner_of_another_shape_is_refused(owner):
    assert list(refused(owner=owner)) == ["owner"]


# --- canary --------------------------------------------------------------------

def test_the_canary_defaults_to_null():
    assert build_one()["canary"] is None


def test_a_canary_naming_another_model_is_kept():
    assert build_one(canary={"model": "other", "percent": 10})["canary"] == {"model": "other", "percent": 10}


def test_a_canary_may_name_a_model_by_alias():
    assert build_one(canary={"model": "other-alias", "percent": 5})["canary"]["model"] == "other-alias"


def test_a_canary_that_is_not_a_model_of_the_catalog_is_refused():
    problems = refused(canary={"model": "ghost", "percent": 10})
    assert list(problems) == ["canary.model"]
    assert "ghost" in problems["canary.model"][0]


@pytest.mark.parametrize("target", ["m", "m-alias"])
def test_a_model_cannot_be_its_own_canary(target):
    assert list(refused(aliases=["m-alias"], canary={"model": target, "percent": 10})) == ["canary.model"]


@pytest.mark.parametrize("percent", [1, 50, 99])
def test_a_canary_percent_from_1_to_99_is_accepted(percent):
    assert build_one(canary={"model": "other", "percent": percent})["canary"]["percent"] == percent


@pytest.mark.parametrize("percent", [0, 100, -5, True, 10.0, "10", None], ids=repr)
def test_a_canary_percent_outside_1_to_99_or_not_whole_is_refused(percent):
    assert list(refused(canary={"model": "other", "percent": percent})) == ["canary.percent"]


@pytest.mark.parametrize("model", [None, "", 3])
def test_a_canary_must_name_a_model(model):
    assert list(refused(canary={"model": model, "percent": 10})) == ["canary.model"]


def test_a_canary_that_is_not_an_object_is_refused():
    assert list(refused(canary="other")) == ["canary"]


# --- eval ----------------------------------------------------------------------

def test_the_eval_gate_defaults_to_null():
    assert build_one()["eval"] is None


def test_an_eval_gate_is_kept_with_its_score_as_a_number():
    assert build_one(eval={"suite": "mmlu-lite", "min_score": 0.7})["eval"] == {"suite": "mmlu-lite", "min_score": 0.7}


@pytest.mark.parametrize("score", [0, 1, 0.0, 1.0, 0.5])
def test_an_eval_min_score_from_0_to_1_is_accepted(score):
    assert build_one(eval={"suite": "s", "min_score": score})["eval"]["min_score"] == score


def test_an_eval_min_score_of_1_and_1_0_make_the_same_catalog():
    def digest(score):
        return build([{"name": "m", "source": "hf://o/m", "eval": {"suite": "s", "min_score": score}}],
                     engines=ENGINES).digest

    assert digest(1) == digest(1.0)


@pytest.mark.parametrize("score", [-0.01, 1.01, 2, True, "0.5", None, math.nan, math.inf], ids=repr)
def test_an_eval_min_score_outside_0_to_1_is_refused(score):
    assert list(refused(eval={"suite": "s", "min_score": score})) == ["eval.min_score"]


@pytest.mark.parametrize("suite", ["", "   ", None, 3])
def test_an_eval_gate_needs_a_suite(suite):
    assert list(refused(eval={"suite": suite, "min_score": 0.5})) == ["eval.suite"]


def test_an_eval_gate_that_is_not_an_object_is_refused():
    assert list(refused(eval="mmlu")) == ["eval"]


# --- fallbacks (one model's side; the catalog's side is in test_catalog) ---------

def test_fallbacks_default_to_none():
    assert build_one()["fallbacks"] == []


def test_fallbacks_are_kept_as_written():
    assert build_one(fallbacks=["other-alias"])["fallbacks"] == ["other-alias"]


@pytest.mark.parametrize("entry", ["", None, 3, {"model": "other"}], ids=repr)
def test_a_fallback_entry_must_name_a_model(entry):
    assert list(refused(fallbacks=["other", entry])) == ["fallbacks.1"]


def test_fallbacks_that_are_not_a_list_are_refused():
    assert list(refused(fallbacks="other")) == ["fallbacks"]


# --- unknown fields ---------------------------------------------------------------

UNKNOWN_AT = {
    "top": ({"gpu": 1}, "gpu"),
    "origin": ({"origin": {"repo": "r", "sha": "x"}}, "origin.sha"),
    "adapters": ({"adapters": [{"name": "a", "source": "hf://o/a"}, {"name": "b", "source": "hf://o/b", "rank": 8}]},
                 "adapters.1.rank"),
    "profiles": ({"profiles": [{"name": "p", "memory": 8}]}, "profiles.0.memory"),
    "scaling": ({"scaling": {"min": 1, "max": 1, "target": 3}}, "scaling.target"),
    "canary": ({"canary": {"model": "other", "percent": 5, "sticky": True}}, "canary.sticky"),
    "eval": ({"eval": {"suite": "s", "min_score": 0.5, "max_score": 1}}, "eval.max_score"),
}


@pytest.mark.parametrize("fields,path", list(UNKNOWN_AT.values()), ids=list(UNKNOWN_AT))
def test_an_unknown_field_is_an_error_at_its_dotted_path(fields, path):
    problems = refused(**fields)
    assert list(problems) == [path]
    assert "unknown" in problems[path][0]


def test_an_unknown_field_of_a_federated_model_is_an_error():
    problems = problems_of([{"name": "peer-a/m", "peer": "peer-a", "quant": "q4"}])
    assert [(p.model, p.path) for p in problems] == [("peer-a/m", "quant")]


# --- every problem at once ------------------------------------------------------------

def test_every_problem_of_a_model_is_reported_at_once_each_with_its_path():
    problems = refused(engine="tgi", scaling={"min": 0, "max": 0}, profiles=[{"name": "p", "gpus": -1}])
    assert sorted(problems) == ["engine", "profiles.0.gpus", "scaling.max"]


def test_problems_of_several_models_are_reported_together():
    problems = problems_of([
        {"name": "a", "source": "ftp://x/y"},
        {"name": "b", "source": "hf://o/b", "owner": "bob"},
        {"name": "c", "source": "hf://o/c"},
    ])
    assert sorted((p.model, p.path) for p in problems) == [("a", "source"), ("b", "owner")]


def test_problems_in_lists_are_reported_at_each_index():
    problems = refused(
        aliases=["ok", "b a d"],
        adapters=[{"name": "x", "source": "hf://o/x"}, {"name": "y", "source": "nope"}],
        profiles=[{"name": "p"}, {"name": "q", "cpu_cores": -2}],
        fallbacks=["other", "ghost"],
    )
    assert sorted(problems) == ["adapters.1.source", "aliases.1", "fallbacks.1", "profiles.1.cpu_cores"]


def test_the_error_groups_messages_by_path_for_a_form():
    with pytest.raises(CatalogError) as info:
        build([{"name": "m", "source": "nope", "owner": "bob"}], engines=ENGINES)
    assert set(info.value.by_path("m")) == {"source", "owner"}
    assert info.value.by_path("someone-else") == {}
    assert "and 1 more problem" in str(info.value)


def test_a_model_that_is_not_an_object_is_refused():
    problems = problems_of([{"name": "ok", "source": "hf://o/ok"}, ["not", "a", "model"]])
    assert [(p.model, p.path) for p in problems] == [("#1", "")]


# --- warnings: allowed to load, refused on add -------------------------------------------

def test_a_cpu_only_profile_without_host_memory_builds_with_a_warning():
    catalog = build([{"name": "m", "source": "hf://o/m", "profiles": [{"name": "cpu", "gpus": 0}]}], engines=ENGINES)
    (warning,) = catalog.warnings("m")
    assert "cpu" in warning and "min_memory_gb" in warning


def test_a_cpu_only_profile_without_host_memory_is_refused_on_add():
    catalog = build([{"name": "m", "source": "hf://o/m",
                      "profiles": [{"name": "gpu"}, {"name": "cpu", "gpus": 0}]}], engines=ENGINES)
    refusals = add_refusals(catalog.resolve("m"))
    assert [path for path, _ in refusals] == ["profiles.1.min_memory_gb"]


def test_a_cpu_only_profile_with_host_memory_has_no_warning_and_no_refusal():
    catalog = build([{"name": "m", "source": "hf://o/m",
                      "profiles": [{"name": "cpu", "gpus": 0, "min_memory_gb": 32}]}], engines=ENGINES)
    assert catalog.warnings("m") == []
    assert add_refusals(catalog.resolve("m")) == []


def test_a_gpu_profile_without_host_memory_has_no_warning():
    catalog = build([{"name": "m", "source": "hf://o/m"}], engines=ENGINES)
    assert catalog.warnings("m") == []
    assert add_refusals(catalog.resolve("m")) == []


# --- values only YAML can produce (settings are YAML) --------------------------------------

YAML_VALUES = {"date": datetime.date(2024, 1, 1), "int-keys": {1: "a", "b": 2}}
YAML_FIELDS = {
    "source": lambda v: {"source": v},
    "profiles.0.gpus": lambda v: {"profiles": [{"name": "p", "gpus": v}]},
    "canary.percent": lambda v: {"canary": {"model": "other", "percent": v}},
    "fallbacks.0": lambda v: {"fallbacks": [v]},
}


@pytest.mark.parametrize("value", list(YAML_VALUES.values()), ids=list(YAML_VALUES))
@pytest.mark.parametrize("path", list(YAML_FIELDS))
def test_a_yaml_only_value_in_a_field_is_refused_at_that_field_not_a_crash(path, value):
    assert list(refused(**YAML_FIELDS[path](value))) == [path]
