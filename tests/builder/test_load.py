"""Load (SPEC §3): stored rows that do not make a valid catalog are skipped
with their reason, never fatal, whatever order the rows come in."""

import json
import random

import pytest

from catalog.builder import CatalogError, load

ENGINES = ("vllm", "llama.cpp", "sglang")
DECLARED = [
    {"name": "declared/llama", "aliases": ["llama"], "source": "hf://meta-llama/Llama-3.1-8B-Instruct"},
    {"name": "declared-cpu", "engine": "llama.cpp", "source": "file:///models/phi.gguf",
     "profiles": [{"name": "cpu", "gpus": 0, "min_memory_gb": 16}]},
]


def row(name, **fields):
    return name, json.dumps({"name": name, "source": "hf://org/x", **fields})


def load_rows(rows, declared=DECLARED, federated=(), defaults=None):
    return load(declared, list(federated), rows, engines=ENGINES, defaults=defaults)


def skipped(catalog):
    return {s.name: s.reason for s in catalog.skipped}


def names(catalog):
    return [m["name"] for m in catalog.models()]


def test_valid_rows_load_after_the_declared_models():
    catalog = load_rows([row("b"), row("a", fallbacks=["llama"])])
    assert names(catalog) == ["a", "b", "declared-cpu", "declared/llama"]
    assert catalog.skipped == []


def test_a_row_that_is_not_json_is_skipped_and_said():
    catalog = load_rows([("broken", "{not json"), row("ok")])
    assert names(catalog) == ["declared-cpu", "declared/llama", "ok"]
    assert "not JSON" in skipped(catalog)["broken"]


def test_a_row_that_is_not_an_object_is_skipped_and_said():
    catalog = load_rows([("list", "[1, 2]"), ("null", "null"), ("text", '"hf://org/x"')])
    assert set(skipped(catalog)) == {"list", "null", "text"}
    assert all("not an object" in reason for reason in skipped(catalog).values())


def test_a_row_whose_definition_names_another_model_is_skipped_and_said():
    catalog = load_rows([("a", json.dumps({"name": "b", "source": "hf://org/b"}))])
    assert "a" not in names(catalog) and "b" not in names(catalog)
    reason = skipped(catalog)["a"]
    assert "'b'" in reason and "'a'" in reason


def test_a_row_that_takes_a_declared_name_is_skipped_and_the_declared_model_stays():
    catalog = load_rows([row("declared/llama", description="from the database")])
    assert catalog.resolve("declared/llama")["description"] == ""
    reason = skipped(catalog)["declared/llama"]
    assert "declared" in reason and "settings" in reason


def test_a_row_that_takes_a_declared_alias_is_skipped():
    catalog = load_rows([row("llama")])
    assert catalog.resolve("llama")["name"] == "declared/llama"
    assert "llama" in skipped(catalog)


def test_a_row_with_an_alias_that_is_a_declared_name_is_skipped():
    catalog = load_rows([row("mine", aliases=["declared-cpu"])])
    assert "mine" in skipped(catalog)
    assert catalog.resolve("declared-cpu")["name"] == "declared-cpu"


def test_a_row_that_claims_to_be_a_peers_model_is_skipped():
    catalog = load_rows([("peer-a/m", json.dumps({"name": "peer-a/m", "peer": "peer-a"}))])
    assert "peer" in skipped(catalog)["peer-a/m"]


def test_an_invalid_row_is_skipped_with_the_field_and_the_problem():
    catalog = load_rows([row("bad", engine="tgi", scaling={"min": 2, "max": 1}), row("good")])
    assert names(catalog) == ["declared-cpu", "declared/llama", "good"]
    reason = skipped(catalog)["bad"]
    assert "engine" in reason and "scaling.max" in reason


def test_a_skipped_row_is_listed_as_runtime():
    catalog = load_rows([row("bad", engine="tgi")])
    assert [(s.name, s.kind) for s in catalog.skipped] == [("bad", "runtime")]


def test_a_row_with_an_invalid_name_is_skipped_under_that_name():
    catalog = load_rows([("bad name", json.dumps({"name": "bad name", "source": "hf://org/x"}))])
    assert "bad name" in skipped(catalog), catalog.skipped


def test_a_row_too_deeply_nested_to_decode_is_skipped_not_fatal():
    deep = "[" * 100_000 + "]" * 100_000
    catalog = load_rows([("deep", deep), row("ok")])
    assert "deep" in skipped(catalog)
    assert "ok" in names(catalog)


def test_a_row_that_cannot_be_written_as_utf8_does_not_break_the_catalog_document():
    catalog = load_rows([("odd", '{"name": "odd", "source": "hf://org/x", "description": "\\ud800"}'), row("ok")])
    assert catalog.digest.startswith("sha256:")
    assert "ok" in names(catalog)


def test_rows_that_fall_back_to_or_canary_an_invalid_row_are_skipped_with_it():
    catalog = load_rows([
        row("c", engine="tgi"),
        row("b", fallbacks=["c"]),
        row("a", canary={"model": "b", "percent": 10}),
        row("fine", fallbacks=["llama"]),
    ])
    assert names(catalog) == ["declared-cpu", "declared/llama", "fine"]
    reasons = skipped(catalog)
    assert "engine" in reasons["c"]
    assert "falls back to 'c'" in reasons["b"] and "skipped" in reasons["b"]
    assert "canary" in reasons["a"] and "'b'" in reasons["a"]


def test_a_row_reaching_an_invalid_row_by_alias_is_skipped_with_it():
    catalog = load_rows([row("c", aliases=["c-alias"], owner="bob"), row("b", fallbacks=["c-alias"])])
    assert set(skipped(catalog)) == {"b", "c"}


def test_a_cascade_through_a_long_chain_skips_every_row_that_reaches_the_bad_one():
    n = 200
    rows = [row(f"m{i:03d}", fallbacks=[f"m{i + 1:03d}"]) for i in range(n - 1)] + [row(f"m{n - 1:03d}", source="x")]
    catalog = load_rows(rows)
    assert len(catalog.skipped) == n
    assert names(catalog) == ["declared-cpu", "declared/llama"]


def test_a_row_that_falls_back_to_a_missing_model_is_skipped_and_its_dependants_too():
    catalog = load_rows([row("a", fallbacks=["gone"]), row("b", fallbacks=["a"]), row("c")])
    assert set(skipped(catalog)) == {"a", "b"}
    assert "gone" in skipped(catalog)["a"]


def test_rows_in_a_fallback_cycle_are_skipped_and_the_rest_loads():
    catalog = load_rows([row("a", fallbacks=["b"]), row("b", fallbacks=["a"]), row("c", fallbacks=["llama"])])
    assert set(skipped(catalog)) == {"a", "b"}
    assert "cycle" in skipped(catalog)["a"]
    assert "c" in names(catalog)


def test_a_row_whose_fallback_was_added_after_it_still_loads():
    # Stored order is creation order: "z-first" existed before its fallback.
    catalog = load_rows([row("z-first", fallbacks=["a-later"]), row("a-later")])
    assert catalog.skipped == []
    assert catalog.used_by("a-later")["fallback_of"] == ["z-first"]


def test_a_valid_row_that_falls_back_to_a_federated_model_loads():
    catalog = load_rows([row("a", fallbacks=["peer-a/m"])], federated=[{"name": "peer-a/m", "peer": "peer-a"}])
    assert "a" in names(catalog)


def test_a_row_whose_federated_fallback_the_peer_dropped_is_skipped():
    catalog = load_rows([row("a", fallbacks=["peer-a/m"]), row("b")], federated=[])
    assert "peer-a/m" in skipped(catalog)["a"]
    assert "b" in names(catalog)


def test_a_row_takes_its_name_from_a_federated_model_and_the_peers_is_not_offered():
    catalog = load_rows([row("peer-a/m")], federated=[{"name": "peer-a/m", "peer": "peer-a"}])
    assert "peer" not in catalog.resolve("peer-a/m")
    assert [(s.name, s.kind) for s in catalog.skipped] == [("peer-a/m", "federated")]
    assert "not offered" in catalog.skipped[0].reason
    assert len(catalog.notices) == 1


def test_an_invalid_federated_model_is_skipped_as_federated_with_the_rows_that_need_it():
    catalog = load_rows([row("a", fallbacks=["peer-a/m"])],
                        federated=[{"name": "peer-a/m", "peer": "peer-a", "description": "d" * 3000}])
    kinds = {s.name: s.kind for s in catalog.skipped}
    assert kinds == {"peer-a/m": "federated", "a": "runtime"}


def test_declared_models_that_do_not_build_raise():
    bad = [{"name": "d", "source": "ftp://x/y"}]
    with pytest.raises(CatalogError) as info:
        load_rows([row("ok")], declared=bad)
    assert [(p.model, p.path) for p in info.value.problems] == [("d", "source")]


def test_declared_models_that_do_not_build_raise_even_with_bad_rows_around():
    with pytest.raises(CatalogError):
        load_rows([row("bad", engine="tgi")], declared=[{"name": "d", "source": "hf://o/d", "owner": "bob"}])


def test_a_cpu_only_row_without_memory_loads_with_a_warning():
    catalog = load_rows([row("cpu", profiles=[{"name": "cpu", "gpus": 0}])])
    assert "cpu" in names(catalog)
    assert catalog.warnings("cpu")


def test_load_applies_the_settings_defaults():
    catalog = load_rows([row("a")], defaults={"engine": "sglang", "scaling": {"min": 0, "max": 3}})
    assert catalog.resolve("a")["engine"] == "sglang"
    assert catalog.resolve("a")["scaling"] == {"min": 0, "max": 3}


def test_a_stored_definition_may_already_be_decoded():
    catalog = load_rows([("a", {"name": "a", "source": "hf://org/a"})])
    assert "a" in names(catalog)


def test_the_result_does_not_depend_on_the_order_of_the_rows():
    rows = [
        row("a", fallbacks=["b"]), row("b", fallbacks=["c"]), row("c"),
        row("d", fallbacks=["bad"]), row("bad", owner="nobody"), row("e", canary={"model": "d", "percent": 3}),
        ("f", "{oops"), row("llama"), row("g", aliases=["shared"]), row("h", aliases=["shared"]),
        row("i", fallbacks=["j"]), row("j", fallbacks=["i"]), row("k", fallbacks=["llama", "a"]),
    ]
    expected = load_rows(rows)
    assert set(skipped(expected)) == {"d", "bad", "e", "f", "llama", "h", "i", "j"}
    for seed in range(20):
        shuffled = rows[:]
        random.Random(seed).shuffle(shuffled)
        catalog = load_rows(shuffled)
        assert catalog.digest == expected.digest
        assert sorted(catalog.skipped) == sorted(expected.skipped)


def test_a_valid_row_is_not_skipped_for_an_alias_only_a_skipped_row_held():
    # "a" is invalid and goes; "b" collided with nothing but "a"'s alias, so
    # without "a" it makes a valid catalog (the seed kept it too). Otherwise
    # whether "b" loads depends on whether its name sorts before "a"'s.
    catalog = load_rows([row("a", aliases=["x"], engine="tgi"), row("b", aliases=["x"])])
    assert set(skipped(catalog)) == {"a"}
    assert catalog.resolve("x")["name"] == "b"


def test_engines_may_be_given_as_any_iterable():
    catalog = load(DECLARED, [], [row("bad", engine="tgi"), row("ok")], engines=iter(ENGINES))
    assert "ok" in names(catalog)


# --- loading again (unchanged rows are remembered, never stale) -----------------------------

def test_loading_the_same_rows_again_gives_the_same_catalog_and_warnings():
    rows = [row("cpu", profiles=[{"name": "cpu", "gpus": 0}]), row("a", fallbacks=["cpu"]), row("bad", engine="tgi")]
    first, again = load_rows(rows), load_rows(rows)
    assert again.digest == first.digest
    assert again.warnings("cpu") == first.warnings("cpu") != []
    assert again.skipped == first.skipped


def test_a_row_is_checked_again_when_the_engines_change():
    rows = [row("a", engine="sglang")]
    assert "a" in names(load_rows(rows))
    catalog = load(DECLARED, [], rows, engines=("vllm", "llama.cpp"))
    assert "engine" in skipped(catalog)["a"]


def test_a_row_follows_a_change_of_the_default_engine():
    rows = [row("a")]
    assert load_rows(rows, defaults={"engine": "vllm"}).resolve("a")["engine"] == "vllm"
    assert load_rows(rows, defaults={"engine": "sglang"}).resolve("a")["engine"] == "sglang"


def test_a_remembered_definition_stored_under_another_name_is_still_skipped():
    text = json.dumps({"name": "a", "source": "hf://org/a"})
    assert "a" in names(load_rows([("a", text)]))
    catalog = load_rows([("b", text)])
    assert "b" in skipped(catalog) and "a" not in names(catalog)


def test_a_declared_model_may_not_fall_back_to_a_peers_model():
    declared = [{"name": "d", "source": "hf://org/d", "fallbacks": ["east/x"]}]
    with pytest.raises(CatalogError) as refused:
        load(declared, [{"name": "east/x", "peer": "east"}], [], engines=ENGINES)
    assert [(p.model, p.path) for p in refused.value.problems] == [("d", "fallbacks.0")]


def test_a_runtime_model_may_fall_back_to_a_peers_model():
    rows = [("r", json.dumps({"name": "r", "source": "hf://org/r", "fallbacks": ["east/x"]}))]
    catalog = load([], [{"name": "east/x", "peer": "east"}], rows, engines=ENGINES)
    assert catalog.resolve("r")["fallbacks"] == ["east/x"]


def test_a_row_clashing_only_with_a_row_skipped_for_its_fallback_still_loads():
    # "b" goes because its fallback "a" goes; "c" only clashed with "b" over
    # the alias "x", so without "b" it is fine (the seed kept it too).
    rows = [row("a", fallbacks=["ghost"]), row("b", aliases=["x"], fallbacks=["a"]), row("c", aliases=["x"])]
    catalog = load_rows(rows)
    assert set(skipped(catalog)) == {"a", "b"}
    assert catalog.resolve("x")["name"] == "c"
