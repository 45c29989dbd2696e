"""The settings document's schema (SPEC §4): every key's rule, reported with
its dotted path so a form or the CLI can point at the key that is wrong.

Pure: no database, no settings file read.
"""

from __future__ import annotations

import pytest

from catalog.builder.settings import (
    BASELINE_GUARD,
    SECRET_MASK,
    SettingsKeyError,
    cluster_problems,
    diff_documents,
    file_problems,
    flatten,
    get_key,
    keep_masked_secrets,
    machine_problems,
    mask_secrets,
    set_key,
    split_keys,
    unset_key,
    with_baseline_guard,
)

VALID = {
    "cluster_name": "test",
    "engines": ["vllm", "llama.cpp"],
    "defaults": {"engine": "vllm", "scaling": {"min": 1, "max": 2}},
    "models": [{"name": "declared/llama", "source": "hf://meta-llama/Llama-3.1-8B-Instruct"}],
    "federation": {"peers": [{"name": "east", "url": "https://east.example:8443", "token": "s3cret-east"}],
                   "offer": "all"},
    "guard": {"policy": "baseline"},
}


def paths(document) -> dict[str, str]:
    return {p.path: p.message for p in cluster_problems(document)}


def with_(**keys) -> dict:
    return {**VALID, **keys}


def peers(*items, **federation) -> dict:
    return with_(federation={"peers": list(items), **federation})


def peer(**fields) -> dict:
    return {"name": "east", "url": "https://east.example", "token": "t0k3n", **fields}


# --- the whole document ---------------------------------------------------------

def test_a_complete_valid_document_has_no_problems():
    assert cluster_problems(VALID) == []


def test_an_empty_document_is_valid():
    assert cluster_problems({}) == []


@pytest.mark.parametrize("document", [[], "cluster_name: x", 7, None])
def test_a_document_that_is_not_a_mapping_is_refused(document):
    assert "" in paths(document)


def test_an_unknown_key_is_refused_by_its_name():
    problems = paths(with_(gaurd={"policy": "strict"}))
    assert set(problems) == {"gaurd"}
    assert "unknown key" in problems["gaurd"]


@pytest.mark.parametrize("key,value", [("listen", "0.0.0.0:8000"), ("node_name", "n1"),
                                       ("tls", {"enabled": True}), ("log", {"level": "info"})])
def test_a_machine_key_in_the_cluster_document_is_refused_as_belonging_to_the_machine_file(key, value):
    problems = paths(with_(**{key: value}))
    assert set(problems) == {key}
    assert "machine" in problems[key] and "file" in problems[key]


# --- cluster_name and engines -------------------------------------------------

@pytest.mark.parametrize("name", ["Test", "-edge", "a" * 64, 7, ""])
def test_cluster_name_must_be_a_dns_label(name):
    assert set(paths(with_(cluster_name=name))) == {"cluster_name"}


@pytest.mark.parametrize("engines", ["vllm", [], {"vllm": 1}, 7])
def test_engines_must_be_a_non_empty_list(engines):
    assert "engines" in paths(with_(engines=engines))


def test_an_engine_name_with_a_space_is_refused_at_its_index():
    assert set(paths(with_(engines=["vllm", "llama cpp"], defaults={}))) == {"engines.1"}


def test_an_engine_listed_twice_is_refused_at_the_second_place():
    problems = paths(with_(engines=["vllm", "sglang", "vllm"]))
    assert set(problems) == {"engines.2"}
    assert "twice" in problems["engines.2"]


# --- defaults -----------------------------------------------------------------

def test_defaults_engine_must_be_one_of_the_engines():
    problems = paths(with_(defaults={"engine": "sglang"}))
    assert set(problems) == {"defaults.engine"}
    assert "vllm" in problems["defaults.engine"] and "llama.cpp" in problems["defaults.engine"]


def test_defaults_engine_is_checked_against_the_default_engines_when_none_are_listed():
    document = {"defaults": {"engine": "sglang"}}
    assert set(paths(document)) == {"defaults.engine"}
    assert paths({"defaults": {"engine": "vllm"}}) == {}


def test_an_unknown_key_under_defaults_is_refused_with_its_dotted_path():
    assert set(paths(with_(defaults={"engine": "vllm", "replicas": 2}))) == {"defaults.replicas"}


def test_defaults_must_be_a_mapping():
    assert set(paths(with_(defaults=["vllm"]))) == {"defaults"}


@pytest.mark.parametrize("scaling,path", [
    ({"min": -1, "max": 2}, "defaults.scaling.min"),
    ({"min": 1.5, "max": 2}, "defaults.scaling.min"),
    ({"min": 0, "max": 0}, "defaults.scaling.max"),
    ({"min": 1, "max": "2"}, "defaults.scaling.max"),
    ({"min": True, "max": 2}, "defaults.scaling.min"),
    ({"min": 3, "max": 2}, "defaults.scaling.max"),
    ({"min": 1, "max": 2, "step": 1}, "defaults.scaling.step"),
    ([1, 2], "defaults.scaling"),
])
def test_defaults_scaling_rules_name_the_key_that_is_wrong(scaling, path):
    assert set(paths(with_(defaults={"engine": "vllm", "scaling": scaling}))) == {path}


def test_defaults_scaling_max_below_min_says_both_values():
    message = paths(with_(defaults={"scaling": {"min": 3, "max": 2}}))["defaults.scaling.max"]
    assert "2" in message and "3" in message


# --- models -----------------------------------------------------------------------

@pytest.mark.parametrize("models", [{"name": "x"}, "x", 7])
def test_models_must_be_a_list(models):
    assert set(paths(with_(models=models))) == {"models"}


# --- federation -------------------------------------------------------------

def test_federation_must_be_a_mapping():
    assert set(paths(with_(federation=["east"]))) == {"federation"}


def test_an_unknown_key_under_federation_is_refused_with_its_dotted_path():
    assert set(paths(with_(federation={"peers": [], "mode": "all"}))) == {"federation.mode"}


def test_federation_peers_must_be_a_list():
    assert set(paths(with_(federation={"peers": {"east": "https://east"}}))) == {"federation.peers"}


def test_a_peer_must_be_a_mapping():
    assert set(paths(peers("east"))) == {"federation.peers.0"}


@pytest.mark.parametrize("name", ["East", "", None, "east_1", 7])
def test_a_peer_name_must_be_a_dns_label(name):
    assert set(paths(peers(peer(name=name)))) == {"federation.peers.0.name"}


def test_a_peer_named_like_this_cluster_is_refused():
    problems = paths(peers(peer(name="test")))
    assert set(problems) == {"federation.peers.0.name"}
    assert "own name" in problems["federation.peers.0.name"]


def test_a_peer_listed_twice_is_refused_at_the_second_place():
    problems = paths(peers(peer(name="east"), peer(name="west"), peer(name="east")))
    assert set(problems) == {"federation.peers.2.name"}
    assert "twice" in problems["federation.peers.2.name"]


@pytest.mark.parametrize("url", ["east.example", "ftp://east.example", "https://", "https://east example", None])
def test_a_peer_url_must_be_http_or_https(url):
    assert set(paths(peers(peer(url=url)))) == {"federation.peers.0.url"}


@pytest.mark.parametrize("token", ["", None, 12345])
def test_a_peer_token_is_required_as_a_string(token):
    assert set(paths(peers(peer(token=token)))) == {"federation.peers.0.token"}


def test_a_peer_without_a_token_is_refused():
    assert set(paths(peers({"name": "east", "url": "https://east.example"}))) == {"federation.peers.0.token"}


def test_an_unknown_key_on_a_peer_is_refused_with_its_dotted_path():
    assert set(paths(peers(peer(secret="x")))) == {"federation.peers.0.secret"}


@pytest.mark.parametrize("offer", ["all", "none", [], ["declared/llama", "qwen2.5:7b"]])
def test_federation_offer_is_all_none_or_a_list_of_names(offer):
    assert paths(peers(peer(), offer=offer)) == {}


@pytest.mark.parametrize("offer", ["some", 1, True, {"declared/llama": True}])
def test_any_other_federation_offer_is_refused(offer):
    assert set(paths(peers(peer(), offer=offer))) == {"federation.offer"}


def test_an_offered_model_that_is_not_a_name_is_refused_at_its_index():
    assert set(paths(peers(peer(), offer=["declared/llama", 7, ""]))) == {"federation.offer.1", "federation.offer.2"}


@pytest.mark.parametrize("interval", [4, "30", 2.5])
def test_federation_interval_must_be_a_whole_number_of_at_least_five_seconds(interval):
    assert set(paths(peers(peer(), interval_seconds=interval))) == {"federation.interval_seconds"}


# --- guard --------------------------------------------------------------------

@pytest.mark.parametrize("policy", ["baseline", "strict", "permissive"])
def test_each_guard_policy_is_accepted(policy):
    assert paths(with_(guard={"policy": policy})) == {}


@pytest.mark.parametrize("guard,path", [
    ({"policy": "lenient"}, "guard.policy"),
    ({}, "guard.policy"),
    ({"policy": "strict", "level": 2}, "guard.level"),
    ("strict", "guard"),
])
def test_guard_rules_name_the_key_that_is_wrong(guard, path):
    assert path in paths(with_(guard=guard))


def test_every_problem_is_reported_not_only_the_first():
    document = with_(engines=[], cluster_name="Bad", guard={"policy": "x"}, extra=1)
    assert {"engines", "cluster_name", "guard.policy", "extra"} <= set(paths(document))


# --- machine keys -------------------------------------------------------------

def machine_paths(document) -> set[str]:
    return {p.path for p in machine_problems(document)}


@pytest.mark.parametrize("listen", ["127.0.0.1:8000", ":8000", "[::1]:8443", "console.internal:80"])
def test_listen_accepts_host_and_port(listen):
    assert machine_paths({"listen": listen}) == set()


@pytest.mark.parametrize("listen", ["127.0.0.1", "8000", "host:port", "host:123456", 8000])
def test_listen_without_host_and_port_is_refused(listen):
    assert machine_paths({"listen": listen}) == {"listen"}


@pytest.mark.parametrize("enabled", ["yes", 1, None])
def test_tls_enabled_must_be_true_or_false(enabled):
    assert machine_paths({"tls": {"enabled": enabled}}) == {"tls.enabled"}


def test_tls_with_cert_and_key_paths_is_accepted():
    assert machine_paths({"tls": {"enabled": True, "cert": "/etc/tls.pem", "key": "/etc/tls.key"}}) == set()


def test_an_unknown_key_under_tls_is_refused_with_its_dotted_path():
    assert machine_paths({"tls": {"enabled": False, "ca": "/etc/ca.pem"}}) == {"tls.ca"}


@pytest.mark.parametrize("level", ["debug", "info", "warning", "error"])
def test_each_log_level_is_accepted(level):
    assert machine_paths({"log": {"level": level}}) == set()


@pytest.mark.parametrize("level", ["verbose", "INFO", 3])
def test_an_unknown_log_level_is_refused(level):
    assert machine_paths({"log": {"level": level}}) == {"log.level"}


def test_node_name_must_be_a_non_empty_string():
    assert machine_paths({"node_name": ""}) == {"node_name"}


def test_a_settings_file_is_checked_for_machine_and_cluster_keys_together():
    problems = {p.path for p in file_problems({**VALID, "listen": "nowhere", "guard": {"policy": "x"}})}
    assert problems == {"listen", "guard.policy"}


def test_a_settings_file_with_machine_keys_is_valid():
    assert file_problems({**VALID, "listen": "127.0.0.1:8000", "node_name": "n1", "tls": {"enabled": False},
                          "log": {"level": "info", "format": "json"}}) == []


def test_split_keys_separates_machine_keys_from_cluster_keys():
    cluster, machine = split_keys({**VALID, "listen": "127.0.0.1:8000", "log": {"level": "info"}})
    assert cluster == VALID
    assert machine == {"listen": "127.0.0.1:8000", "log": {"level": "info"}}


# --- baseline guard -----------------------------------------------------------

def test_a_document_without_a_guard_gets_the_baseline_guard():
    document = {k: v for k, v in VALID.items() if k != "guard"}
    assert with_baseline_guard(document)["guard"] == BASELINE_GUARD


def test_a_document_with_a_guard_keeps_it():
    assert with_baseline_guard(with_(guard={"policy": "strict"}))["guard"] == {"policy": "strict"}


# --- dotted keys --------------------------------------------------------------

def test_get_key_reads_a_nested_key():
    assert get_key(VALID, "defaults.scaling.max") == 2


def test_get_key_reads_a_list_item_by_index():
    assert get_key(VALID, "models.0.name") == "declared/llama"


@pytest.mark.parametrize("key", ["defaults.scaling.step", "models.3.name", "guard.policy.x", "nothing", "a..b", ""])
def test_get_key_refuses_a_key_that_is_not_set(key):
    with pytest.raises(SettingsKeyError):
        get_key(VALID, key)


def test_set_key_creates_the_missing_mappings_on_the_way():
    changed = set_key({}, "federation.offer", "none")
    assert changed == {"federation": {"offer": "none"}}


def test_set_key_leaves_the_original_document_untouched():
    changed = set_key(VALID, "defaults.scaling.max", 5)
    assert changed["defaults"]["scaling"] == {"min": 1, "max": 5}
    assert VALID["defaults"]["scaling"] == {"min": 1, "max": 2}


def test_set_key_inside_a_list_item_needs_the_item_to_exist():
    assert set_key(VALID, "models.0.class", "critical")["models"][0]["class"] == "critical"
    with pytest.raises(SettingsKeyError):
        set_key(VALID, "models.1.class", "critical")


def test_set_key_inside_a_value_that_is_not_a_mapping_is_refused():
    with pytest.raises(SettingsKeyError):
        set_key(VALID, "cluster_name.x", 1)


def test_unset_key_removes_the_key_and_keeps_its_siblings():
    changed = unset_key(VALID, "defaults.scaling.min")
    assert changed["defaults"] == {"engine": "vllm", "scaling": {"max": 2}}
    assert VALID["defaults"]["scaling"] == {"min": 1, "max": 2}


def test_unset_key_removes_a_list_item():
    assert unset_key(VALID, "models.0")["models"] == []


def test_unset_key_refuses_a_key_that_is_not_set():
    with pytest.raises(SettingsKeyError):
        unset_key(VALID, "guard.level")


# --- diffs --------------------------------------------------------------------

def test_flatten_keys_named_list_items_by_name():
    flat = flatten({"models": [{"name": "a/b", "scaling": {"max": 2}}]})
    assert flat == {"models[a/b].name": "a/b", "models[a/b].scaling.max": 2}


def test_a_diff_names_the_model_field_that_changed_not_the_index_that_moved():
    old = {"models": [{"name": "a", "class": ""}, {"name": "b", "class": ""}]}
    new = {"models": [{"name": "b", "class": ""}, {"name": "a", "class": "critical"}]}
    assert diff_documents(old, new) == [
        {"key": "models[a].class", "change": "changed", "before": "", "after": "critical"}]


def test_a_diff_reports_added_and_removed_keys():
    changes = {c["key"]: c["change"] for c in diff_documents({"guard": {"policy": "baseline"}},
                                                              {"cluster_name": "test"})}
    assert changes == {"guard.policy": "removed", "cluster_name": "added"}


# --- secrets ------------------------------------------------------------------

def test_mask_secrets_hides_every_peer_token_and_leaves_the_original_alone():
    document = peers(peer(name="east", token="tok-east"), peer(name="west", token="tok-west"))
    masked = mask_secrets(document)
    assert "tok-east" not in repr(masked) and "tok-west" not in repr(masked)
    assert [p["token"] for p in masked["federation"]["peers"]] == [SECRET_MASK, SECRET_MASK]
    assert document["federation"]["peers"][0]["token"] == "tok-east"


def test_a_masked_token_written_back_keeps_the_stored_token_of_the_same_peer():
    stored = peers(peer(name="east", token="tok-east"))
    written = keep_masked_secrets(mask_secrets(stored), stored)
    assert written == stored


def test_a_new_token_written_replaces_the_stored_one():
    stored = peers(peer(name="east", token="tok-east"))
    written = keep_masked_secrets(peers(peer(name="east", token="tok-new")), stored)
    assert written["federation"]["peers"][0]["token"] == "tok-new"
