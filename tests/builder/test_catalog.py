"""The whole catalog (SPEC §2.1, §2.3): one namespace, references, cycles,
federated models, and what a built catalog answers."""

import hashlib
import json
import random

import pytest

from catalog.builder import CatalogError, build, diff_models

ENGINES = ("vllm", "llama.cpp", "sglang")


def local(name, **fields):
    return {"name": name, "source": f"hf://org/{name.replace('/', '-').replace(':', '-')}", **fields}


def peer(name, **fields):
    return {"name": name, "peer": name.split("/", 1)[0], **fields}


def make(models, **kw):
    return build(models, engines=ENGINES, **kw)


def problems_of(models, **kw):
    with pytest.raises(CatalogError) as info:
        make(models, **kw)
    return info.value.problems


def where(problems):
    return sorted((p.model, p.path) for p in problems)


# --- one namespace -----------------------------------------------------------------

def test_two_models_with_the_same_name_are_refused_and_the_earlier_one_keeps_it():
    problems = problems_of([local("m"), local("m", description="second")])
    assert [(p.model, p.path) for p in problems] == [("m", "name")]
    assert "already used" in problems[0].message


def test_an_alias_that_is_another_models_name_is_refused():
    problems = problems_of([local("a"), local("b", aliases=["a"])])
    assert where(problems) == [("b", "aliases.0")]
    assert "'a'" in problems[0].message


def test_a_name_that_is_another_models_alias_is_refused_on_the_later_model():
    problems = problems_of([local("a", aliases=["shared"]), local("shared")])
    assert where(problems) == [("shared", "name")]


def test_two_models_with_the_same_alias_are_refused_on_the_later_model():
    problems = problems_of([local("a", aliases=["x"]), local("b", aliases=["y", "x"])])
    assert where(problems) == [("b", "aliases.1")]


# --- references: fallbacks ---------------------------------------------------------------

def test_a_fallback_resolves_by_name_or_alias():
    catalog = make([local("a", fallbacks=["b", "c-alias"]), local("b"), local("c", aliases=["c-alias"])])
    assert catalog.resolve("a")["fallbacks"] == ["b", "c-alias"]


def test_a_fallback_to_an_unknown_model_is_refused_at_its_index():
    problems = problems_of([local("a", fallbacks=["b", "ghost"]), local("b")])
    assert where(problems) == [("a", "fallbacks.1")]
    assert "ghost" in problems[0].message


@pytest.mark.parametrize("target", ["a", "a-alias"])
def test_a_model_cannot_fall_back_to_itself(target):
    problems = problems_of([local("a", aliases=["a-alias"], fallbacks=[target])])
    assert where(problems) == [("a", "fallbacks.0")]


@pytest.mark.parametrize("fallbacks", [["b", "b"], ["b", "b-alias"]])
def test_a_fallback_listed_twice_is_refused_at_the_repeat(fallbacks):
    problems = problems_of([local("a", fallbacks=fallbacks), local("b", aliases=["b-alias"])])
    assert where(problems) == [("a", "fallbacks.1")]


def test_two_models_falling_back_to_each_other_are_a_cycle():
    problems = problems_of([local("a", fallbacks=["b"]), local("b", fallbacks=["a"])])
    assert where(problems) == [("a", "fallbacks.0"), ("b", "fallbacks.0")]
    assert all("cycle" in p.message for p in problems)


def test_a_cycle_through_aliases_is_found():
    problems = problems_of([local("a", aliases=["x"], fallbacks=["z"]), local("b", aliases=["y"], fallbacks=["x"]),
                            local("c", aliases=["z"], fallbacks=["y"])])
    assert where(problems) == [("a", "fallbacks.0"), ("b", "fallbacks.0"), ("c", "fallbacks.0")]


def test_a_cycle_is_reported_on_the_fallback_that_enters_it():
    problems = problems_of([local("a", fallbacks=["outside", "b"]), local("b", fallbacks=["a"]), local("outside")])
    assert where(problems) == [("a", "fallbacks.1"), ("b", "fallbacks.0")]


def test_the_cycle_message_names_its_models():
    problems = problems_of([local("a", fallbacks=["b"]), local("b", fallbacks=["c"]), local("c", fallbacks=["a"]),
                            local("d")])
    for p in problems:
        chain = p.message.split(":", 1)[1]
        assert all(n in chain for n in "abc") and "d" not in chain


def test_models_that_reach_a_cycle_without_being_in_it_are_not_blamed():
    problems = problems_of([local("entry", fallbacks=["a"]), local("a", fallbacks=["b"]), local("b", fallbacks=["a"])])
    assert where(problems) == [("a", "fallbacks.0"), ("b", "fallbacks.0")]


def test_a_long_cycle_is_found_and_every_member_is_told():
    n = 300
    models = [local(f"m{i}", fallbacks=[f"m{(i + 1) % n}"]) for i in range(n)]
    random.Random(7).shuffle(models)
    problems = problems_of(models)
    assert len(problems) == n
    assert {p.path for p in problems} == {"fallbacks.0"}


def test_a_diamond_of_fallbacks_is_not_a_cycle():
    catalog = make([local("a", fallbacks=["b", "c"]), local("b", fallbacks=["d"]), local("c", fallbacks=["d"]),
                    local("d")])
    assert catalog.used_by("d")["fallback_of"] == ["b", "c"]


def test_a_long_fallback_chain_is_not_a_cycle():
    models = [local(f"m{i:04d}", fallbacks=[f"m{i + 1:04d}"] if i < 999 else []) for i in range(1000)]
    assert len(make(models)) == 1000


def test_two_independent_cycles_are_both_reported():
    problems = problems_of([local("a", fallbacks=["b"]), local("b", fallbacks=["a"]),
                            local("c", fallbacks=["d"]), local("d", fallbacks=["c"])])
    assert {p.model for p in problems} == {"a", "b", "c", "d"}


# --- linear, not recursive (no timing here: that is bench/B1) -----------------------------

def test_a_fallback_chain_of_twenty_thousand_models_builds_without_recursion():
    n = 20_000
    models = [local(f"m{i}", fallbacks=[f"m{i + 1}"]) for i in range(n - 1)] + [local(f"m{n - 1}")]
    catalog = make(models)
    assert len(catalog) == n
    assert catalog.used_by(f"m{n - 1}")["fallback_of"] == [f"m{n - 2}"]


def test_a_cycle_of_five_thousand_models_is_reported_not_hung():
    n = 5_000
    problems = problems_of([local(f"m{i}", fallbacks=[f"m{(i + 1) % n}"]) for i in range(n)])
    assert len(problems) == n
    assert all("cycle" in p.message for p in problems)
    assert len(problems[0].message) < 300  # a long cycle is named in short, not model by model


# --- federated models ------------------------------------------------------------------------

def test_a_federated_model_keeps_only_its_name_aliases_description_engine_and_peer():
    catalog = make([peer("peer-a/llama", aliases=["peer-a/l"], description="theirs", engine="whatever")])
    assert catalog.resolve("peer-a/l") == {"name": "peer-a/llama", "aliases": ["peer-a/l"], "description": "theirs",
                                          "engine": "whatever", "peer": "peer-a"}


def test_a_federated_model_is_named_after_its_peer():
    problems = problems_of([peer("peer-a/llama", aliases=["llama"]), {"name": "other/m", "peer": "peer-a"}])
    assert where(problems) == [("other/m", "name"), ("peer-a/llama", "aliases.0")]


@pytest.mark.parametrize("name", ["Peer/m", "-peer/m", "pe_er/m"])
def test_a_federated_model_needs_a_valid_peer_name(name):
    problems = problems_of([{"name": name, "peer": name.split("/")[0]}])
    assert where(problems) == [(name, "peer")]


def test_a_federated_model_can_be_a_fallback_and_a_canary():
    catalog = make([local("a", fallbacks=["peer-a/m"], canary={"model": "peer-b/m", "percent": 5}),
                    peer("peer-a/m"), peer("peer-b/m")])
    assert catalog.used_by("peer-a/m")["fallback_of"] == ["a"]
    assert catalog.used_by("peer-b/m")["canary_of"] == ["a"]


def test_a_federated_model_can_be_a_fallback_by_its_alias():
    catalog = make([local("a", fallbacks=["peer-a/short"]), peer("peer-a/m", aliases=["peer-a/short"])])
    assert catalog.used_by("peer-a/m")["fallback_of"] == ["a"]


def test_a_federated_model_with_a_declared_name_is_not_offered_and_said():
    catalog = make([local("peer-a/m", description="ours"), peer("peer-a/m", description="theirs")])
    assert catalog.resolve("peer-a/m")["description"] == "ours"
    assert len(catalog) == 1
    (notice,) = catalog.notices
    assert "peer-a/m" in notice and "not offered" in notice


def test_a_federated_model_with_a_runtime_name_is_not_offered_even_though_runtime_comes_later():
    catalog = make([local("declared"), peer("peer-a/m"), local("peer-a/m", description="runtime")])
    assert catalog.resolve("peer-a/m")["description"] == "runtime"
    assert "peer" not in catalog.resolve("peer-a/m")
    assert len(catalog.notices) == 1


def test_a_federated_model_whose_name_is_a_local_alias_is_not_offered():
    catalog = make([local("llama", aliases=["peer-a/llama"]), peer("peer-a/llama")])
    assert catalog.resolve("peer-a/llama")["name"] == "llama"
    assert [m["name"] for m in catalog.models()] == ["llama"]
    assert len(catalog.notices) == 1


def test_a_federated_model_whose_alias_is_a_local_name_is_not_offered():
    catalog = make([local("peer-a/x"), peer("peer-a/m", aliases=["peer-a/x"])])
    assert catalog.resolve("peer-a/m") is None
    assert len(catalog.notices) == 1


def test_a_fallback_to_a_name_a_peer_also_offers_stays_in_the_cluster():
    catalog = make([local("a", fallbacks=["peer-a/m"]), local("peer-a/m"), peer("peer-a/m")])
    assert "peer" not in catalog.resolve("peer-a/m")
    assert catalog.used_by("peer-a/m")["fallback_of"] == ["a"]


def test_a_federated_model_that_collides_with_nothing_gives_no_notice():
    assert make([local("a"), peer("peer-a/m")]).notices == []


# --- canaries across the catalog --------------------------------------------------------------

def test_a_canary_resolves_by_alias_and_is_listed_in_used_by():
    catalog = make([local("a", canary={"model": "b-next", "percent": 20}), local("b", aliases=["b-next"])])
    assert catalog.used_by("b") == {"fallback_of": [], "canary_of": ["a"]}


def test_a_canary_is_not_a_fallback_cycle():
    catalog = make([local("a", canary={"model": "b", "percent": 5}), local("b", fallbacks=["a"])])
    assert len(catalog) == 2


# --- what a built catalog answers -------------------------------------------------------------

def test_resolve_finds_a_model_by_name_or_alias_and_nothing_else():
    catalog = make([local("a", aliases=["x"])])
    assert catalog.resolve("a") is catalog.resolve("x")
    assert catalog.resolve("ghost") is None


def test_models_are_sorted_by_name():
    catalog = make([local("zeta"), local("Alpha"), local("beta"), local("alpha/x"), peer("peer-a/m")])
    assert [m["name"] for m in catalog.models()] == ["Alpha", "alpha/x", "beta", "peer-a/m", "zeta"]


def test_sources_map_each_weights_uri_to_the_models_that_load_it_adapters_included():
    catalog = make([
        {"name": "b", "source": "hf://org/base", "adapters": [{"name": "x", "source": "s3://bucket/lora"},
                                                            {"name": "y", "source": "s3://bucket/lora"}]},
        {"name": "a", "source": "hf://org/base"},
        {"name": "c", "source": "s3://bucket/lora"},
        peer("peer-a/m"),
    ])
    assert catalog.sources() == {"hf://org/base": ["a", "b"], "s3://bucket/lora": ["b", "c"]}
    assert list(catalog.sources()) == sorted(catalog.sources())


def test_used_by_lists_who_falls_back_to_a_model_and_who_canaries_it():
    catalog = make([local("t"), local("b", fallbacks=["t"]), local("a", fallbacks=["t"]),
                    local("c", canary={"model": "t", "percent": 1})])
    assert catalog.used_by("t") == {"fallback_of": ["a", "b"], "canary_of": ["c"]}
    assert catalog.used_by("a") == {"fallback_of": [], "canary_of": []}
    assert catalog.used_by("ghost") == {"fallback_of": [], "canary_of": []}


def test_a_catalog_warning_belongs_to_its_model_only():
    catalog = make([local("cpu", profiles=[{"name": "cpu", "gpus": 0}]), local("gpu")])
    assert len(catalog.warnings("cpu")) == 1
    assert catalog.warnings("gpu") == []


def test_the_catalog_effective_class_resolves_aliases():
    catalog = make([local("a", aliases=["x"], scaling={"min": 0, "max": 1})])
    assert catalog.effective_class("x") == "opportunistic"
    assert catalog.effective_class("ghost") is None


# --- the canonical document -----------------------------------------------------------------

def test_the_document_is_the_models_as_canonical_json():
    catalog = make([local("b", description="ünïcode 🦙"), local("a")])
    body = catalog.document().body
    assert json.loads(body.decode("utf-8")) == catalog.models()
    assert body == json.dumps(catalog.models(), sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False).encode("utf-8")


def test_the_document_has_no_whitespace_between_tokens_and_sorted_keys():
    body = make([local("a", description="x")]).document().body
    assert b": " not in body and b", " not in body and b"\n" not in body
    first = json.loads(body)[0]
    assert list(first) == sorted(first)


def test_the_document_keeps_non_ascii_text_as_utf8():
    body = make([local("a", description="日本語")]).document().body
    assert "日本語".encode("utf-8") in body
    assert b"\\u" not in body


def test_the_digest_is_sha256_of_exactly_the_body():
    document = make([local("a"), local("b")]).document()
    assert document.digest == "sha256:" + hashlib.sha256(document.body).hexdigest()
    assert make([local("a"), local("b")]).digest == document.digest


def test_equal_catalogs_give_equal_bytes_whatever_the_order_of_the_models():
    models = [local(f"m{i}", aliases=[f"alias{i}"], fallbacks=[f"m{i + 1}"] if i < 9 else []) for i in range(10)]
    models.append(peer("peer-a/m"))
    shuffled = models[:]
    random.Random(3).shuffle(shuffled)
    assert make(models).document() == make(shuffled).document()


def test_a_change_to_any_model_changes_the_digest():
    assert make([local("a")]).digest != make([local("a", description="x")]).digest


def test_the_dropped_federated_model_is_not_in_the_document():
    with_peer = make([local("peer-a/m"), peer("peer-a/m")])
    assert with_peer.digest == make([local("peer-a/m")]).digest


# --- model-level diff ---------------------------------------------------------------------------

def test_diff_models_names_added_removed_and_changed_fields_sorted():
    old = make([local("keep"), local("change"), local("gone")]).models()
    new = make([local("keep"), local("change", description="new", scaling={"min": 0, "max": 2}),
                local("new-b"), local("new-a")]).models()
    assert diff_models(old, new) == {
        "added": ["new-a", "new-b"],
        "removed": ["gone"],
        "changed": [{"name": "change", "fields": ["description", "scaling"]}],
    }


def test_diff_of_a_catalog_with_itself_is_empty():
    models = make([local("a"), local("b")]).models()
    assert diff_models(models, models) == {"added": [], "removed": [], "changed": []}


def test_diff_notices_a_field_that_appears_or_disappears():
    assert diff_models([{"name": "m", "a": 1}], [{"name": "m", "b": 1}])["changed"] == [
        {"name": "m", "fields": ["a", "b"]}]


# --- models given as their stored JSON text ------------------------------------------------------

def test_a_model_given_as_json_text_builds_like_the_object():
    text = json.dumps(local("a", aliases=["x"], fallbacks=["b"]))
    assert make([text, local("b")]).document() == make([local("a", aliases=["x"], fallbacks=["b"]),
                                                         local("b")]).document()


def test_a_model_given_as_text_that_is_not_json_is_refused_as_not_an_object():
    problems = problems_of(["{not json", local("b")])
    assert [(p.model, p.path) for p in problems] == [("#0", "")]


def test_an_invalid_model_given_as_json_text_is_refused_every_time():
    text = json.dumps(local("a", owner="bob"))
    for _ in range(2):
        assert [p.path for p in problems_of([text])] == ["owner"]


def test_a_model_given_as_json_text_nested_too_deeply_to_decode_is_refused():
    problems = problems_of(["[" * 100_000 + "]" * 100_000, local("b")])
    assert [(p.model, p.path) for p in problems] == [("#0", "")]
