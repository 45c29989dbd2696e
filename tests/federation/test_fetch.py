"""Fetching a peer's offer into our catalog (SPEC §6): east runs in its own
process; west (this process) fetches its offer over HTTP the way the
periodic task does, and the models appear, are used, go and come back."""

from datetime import timedelta

import pytest
from django.utils import timezone

from catalog import selectors
from catalog.models import PeerOffer
from catalog.services.federation import fetch_all_peers
from catalog.services.settings import set_setting
from catalog.tasks import fetch_peer_offers
from tests.federation.peer import (  # noqa: F401  (fixtures)
    EAST_LOCAL,
    EAST_RUNTIME,
    catalog_versions,
    closed_url,
    configure_west,
    east,
    east_cluster,
    our_models,
    our_peers,
    our_skipped,
    peer_entry,
    stub_peers,
)

pytestmark = pytest.mark.slow

EAST_FEDERATED = {f"east/{name}" for name in EAST_LOCAL}


@pytest.fixture
def west(db, settings_file, east):
    """Our cluster, west, with east as its one peer."""
    return configure_west(settings_file, [peer_entry(east)])


def _fallback_to(name: str, target: str) -> dict:
    return {"name": name, "source": f"hf://west-org/{name}", "fallbacks": [target]}


def test_fetched_models_appear_named_after_their_peer(west, viewer_api):
    assert fetch_peer_offers() == 1  # the periodic task

    federated = our_models(viewer_api, kind="federated")
    assert set(federated) == EAST_FEDERATED
    chat = federated["east/chat"]
    assert chat["kind"] == "federated"
    assert chat["peer"] == "east"
    assert chat["aliases"] == ["east/chat-latest"]
    assert chat["description"] == "east's general chat model"
    assert federated["east/coder"]["engine"] == "sglang"
    # How east runs them is east's business: nothing of it is kept here.
    assert not {"source", "profiles", "scaling"} & set(chat)
    # Found by its alias too, and our own models are still ours.
    by_alias = viewer_api.get("/api/v1/models/east/chat-latest")
    assert by_alias.status_code == 200
    assert by_alias.json()["name"] == "east/chat"
    assert our_models(viewer_api)["declared/llama"]["kind"] == "declared"


def test_a_federated_model_cannot_be_changed_here(west, operator_api):
    fetch_all_peers(force=True)

    attempts = [
        operator_api.put("/api/v1/models/east/chat", {"source": "hf://west-org/chat"}, format="json"),
        operator_api.patch("/api/v1/models/east/chat", {"scaling": {"min": 0, "max": 1}}, format="json"),
        operator_api.patch("/api/v1/models/east/chat-latest", {"class": "critical"}, format="json"),
        operator_api.delete("/api/v1/models/east/chat"),
        operator_api.post("/api/v1/models/east/chat/-/resources", {"min_memory_gb": 8, "cpu_cores": 2},
                          format="json"),
    ]

    for response in attempts:
        assert response.status_code == 409, (response.request["REQUEST_METHOD"], response.content)
        assert "east" in response.json()["detail"]
    assert our_models(operator_api)["east/chat"]["kind"] == "federated"


def test_a_federated_model_can_be_a_fallback_and_a_canary(west, operator_api):
    fetch_all_peers(force=True)

    created = operator_api.post("/api/v1/models", {
        "name": "ours", "source": "hf://west-org/ours", "fallbacks": ["east/bar"],
        "canary": {"model": "east/chat-latest", "percent": 10}}, format="json")

    assert created.status_code == 201, created.content
    assert created.json()["fallbacks"] == ["east/bar"]
    bar = operator_api.get("/api/v1/models/east/bar").json()
    assert bar["used_by"] == {"fallback_of": ["ours"], "canary_of": []}
    chat = operator_api.get("/api/v1/models/east/chat").json()
    assert chat["used_by"]["canary_of"] == ["ours"]
    # Gateways route to the peer with what the catalog document says.
    document = operator_api.get("/api/v1/catalog").json()
    assert {"name": "east/bar", "peer": "east"}.items() <= \
        next(m for m in document["models"] if m["name"] == "east/bar").items()


def test_peers_show_when_they_were_fetched_and_what_they_offer(west, operator_api, viewer_api, east):
    before = our_peers(viewer_api)["east"]
    assert before["fetched_at"] is None
    assert before["stale"] is True
    assert before["models"] == []

    fetched = operator_api.post("/api/v1/federation/peers/fetch")

    assert fetched.status_code == 200, fetched.content
    peer = our_peers(viewer_api)["east"]
    assert peer["url"] == east.url
    assert peer["fetched_at"] is not None
    assert peer["stale"] is False
    assert peer["last_error"] is None
    assert set(peer["models"]) == {f"east/{name}" for name in EAST_LOCAL}
    # The shared secret is never shown back.
    assert east.shared_token not in viewer_api.get("/api/v1/federation/peers").content.decode()
    assert viewer_api.post("/api/v1/federation/peers/fetch").status_code == 403


@pytest.mark.parametrize("order", ["ours first", "theirs first"])
def test_our_runtime_model_wins_a_name_the_peer_also_offers(west, operator_api, operator_user, client, order):
    # Hugging Face names look like ORG/MODEL: a runtime model may well be
    # called east/foo on a cluster that has a peer called east.
    ours = {"name": "east/foo", "source": "hf://east/foo", "description": "ours"}
    if order == "ours first":
        assert operator_api.post("/api/v1/models", ours, format="json").status_code == 201
        fetch_all_peers(force=True)
    else:
        fetch_all_peers(force=True)
        assert our_models(operator_api)["east/foo"]["kind"] == "federated"
        assert operator_api.post("/api/v1/models", ours, format="json").status_code == 201

    models = our_models(operator_api)
    assert models["east/foo"]["kind"] == "runtime"
    assert models["east/foo"]["description"] == "ours"
    assert operator_api.get("/api/v1/models/east/foo-alias").status_code == 404
    assert "east/chat" in models  # the rest of the offer is unaffected
    notices = selectors.in_force().catalog.notices
    assert any("east/foo" in notice and "not offered" in notice for notice in notices), notices
    # The operator sees why on the Federation page.
    client.force_login(operator_user)
    page = client.get("/federation/")
    assert page.status_code == 200
    assert "federated model &#x27;east/foo&#x27; is not offered" in page.content.decode()


def test_a_local_alias_keeps_the_peer_model_out_entirely(west, operator_api):
    fetch_all_peers(force=True)

    mine = {"name": "mine", "aliases": ["east/chat-latest"], "source": "hf://west-org/mine"}
    assert operator_api.post("/api/v1/models", mine, format="json").status_code == 201

    assert operator_api.get("/api/v1/models/east/chat-latest").json()["name"] == "mine"
    assert "east/chat" not in our_models(operator_api)
    assert any("east/chat" in n for n in selectors.in_force().catalog.notices)


def test_a_declared_model_wins_a_name_the_peer_offers(db, settings_file, east, viewer_api):
    document = configure_west(settings_file, [peer_entry(east)])
    configure_west(settings_file, [peer_entry(east)], models=[
        *document["models"], {"name": "east/coder", "source": "hf://west-org/coder", "description": "ours"}])

    fetch_all_peers(force=True)

    models = our_models(viewer_api)
    assert models["east/coder"]["kind"] == "declared"
    assert models["east/chat"]["kind"] == "federated"
    assert any("east/coder" in n for n in selectors.in_force().catalog.notices)


def test_a_model_whose_fallback_the_peer_drops_is_skipped_until_it_is_offered_again(west, operator_api, east):
    fetch_all_peers(force=True)
    assert operator_api.post("/api/v1/models", _fallback_to("ours", "east/bar"), format="json").status_code == 201
    assert "ours" in our_models(operator_api)

    east.remove_model("bar")
    fetch_all_peers(force=True)

    models = our_models(operator_api)
    assert "east/bar" not in models
    assert "ours" not in models
    skipped = our_skipped(operator_api)
    assert "east/bar" in skipped["ours"]["reason"], skipped
    assert operator_api.get("/api/v1/models/ours").status_code == 404

    east.add_model(next(m for m in EAST_RUNTIME if m["name"] == "bar"))
    fetch_all_peers(force=True)

    assert "ours" in our_models(operator_api)
    assert our_skipped(operator_api) == {}


def test_a_catalog_version_is_recorded_only_when_the_offer_changes(west, east):
    selectors.in_force()  # the settings import records the first version
    start = catalog_versions()

    fetch_all_peers(force=True)
    after_first = catalog_versions()
    assert after_first == start + 1
    assert selectors.latest_catalog_version().reason == "peer offers changed"

    assert PeerOffer.objects.get(peer="east").etag.startswith('"sha256:')
    fetch_all_peers(force=True)  # east answers 304 to the ETag we keep
    assert catalog_versions() == after_first

    east.add_model({"name": "baz", "source": "hf://east-org/baz"})
    fetch_all_peers(force=True)
    assert catalog_versions() == after_first + 1
    assert "east/baz" in {m["name"] for m in selectors.in_force().catalog.models()}

    east.remove_model("baz")
    fetch_all_peers(force=True)
    assert catalog_versions() == after_first + 2
    assert "east/baz" not in {m["name"] for m in selectors.in_force().catalog.models()}


def test_an_unreachable_peer_keeps_its_last_offer_and_is_shown_stale(west, operator_api, east):
    fetch_all_peers(force=True)
    fetched_at = our_peers(operator_api)["east"]["fetched_at"]
    versions = catalog_versions()

    set_setting(key="federation.peers.0.url", value=closed_url(),
                base_version=selectors.settings_in_force().version, by="tests")
    fetch_all_peers(force=True)

    assert EAST_FEDERATED <= set(our_models(operator_api))
    peer = our_peers(operator_api)["east"]
    assert peer["stale"] is True
    assert peer["last_error"]
    assert peer["fetched_at"] == fetched_at
    assert catalog_versions() == versions

    set_setting(key="federation.peers.0.url", value=east.url,
                base_version=selectors.settings_in_force().version, by="tests")
    fetch_all_peers(force=True)

    peer = our_peers(operator_api)["east"]
    assert peer["stale"] is False
    assert peer["last_error"] is None
    assert catalog_versions() == versions


@pytest.mark.parametrize("interval, minutes_ago, stale", [(None, 10, True), (600, 5, False), (5, 1, True)])
def test_a_peer_not_fetched_for_three_intervals_is_shown_stale(db, settings_file, east, viewer_api, interval,
                                                               minutes_ago, stale):
    document = configure_west(settings_file, [peer_entry(east)])
    if interval is not None:
        document["federation"]["interval_seconds"] = interval
        settings_file.write(document)
    fetch_all_peers(force=True)
    assert our_peers(viewer_api)["east"]["stale"] is False

    # The last successful fetch was this long ago, and nothing since.
    PeerOffer.objects.filter(peer="east").update(fetched_at=timezone.now() - timedelta(minutes=minutes_ago))

    assert our_peers(viewer_api)["east"]["stale"] is stale


def test_a_peer_taken_out_of_the_settings_takes_its_models_with_it(west, operator_api):
    fetch_all_peers(force=True)
    assert EAST_FEDERATED <= set(our_models(operator_api))

    set_setting(key="federation.peers", value=[], base_version=selectors.settings_in_force().version, by="tests")

    assert not EAST_FEDERATED & set(our_models(operator_api))
    assert fetch_all_peers(force=True) == 0
    assert our_peers(operator_api) == {}


# --- peers that answer garbage ------------------------------------------------------

GOOD_OFFER = [{"name": "north-model", "aliases": [], "description": "", "engine": "vllm"}]

GARBAGE = {
    "not json": (200, "not json"),
    "models not a list": (200, '{"models": 5}'),
    "a list, not an offer": (200, "[1, 2]"),
    "server error": (500, '{"models": []}'),
    "not found": (404, "<html>no such page</html>"),
    "nested too deep": (200, '{"models": ' + "[" * 100_000 + "]" * 100_000 + "}"),
    "lone surrogate": (200, '{"models": [{"name": "bad\\ud800", "aliases": [], "description": "", "engine": "vllm"}]}'),
    "NUL character": (200, '{"models": [{"name": "nul", "aliases": [], "description": "a\\u0000b", "engine": "vllm"}]}'),
}


@pytest.mark.parametrize("garbage", list(GARBAGE))
def test_a_peer_answering_garbage_never_breaks_our_catalog(db, settings_file, stub_peers, operator_api, garbage):
    south, north = stub_peers(), stub_peers()
    south.offer([{"name": "south-model", "aliases": ["sm"], "description": "", "engine": "vllm"}])
    north.offer(GOOD_OFFER)
    configure_west(settings_file, [peer_entry(south, name="south", token="t-south"),
                                   peer_entry(north, name="north", token="t-north")])
    assert operator_api.post("/api/v1/federation/peers/fetch").status_code == 200
    assert our_peers(operator_api)["south"]["models"] == ["south/south-model"]
    north.offer([*GOOD_OFFER, {"name": "north-new", "aliases": [], "description": "", "engine": "vllm"}])

    status, body = GARBAGE[garbage]
    south.answer(status, body)
    # A NUL is valid JSON and may be a valid description: taking the model is fine.
    allowed = {"south/south-model", "south/nul"} if garbage == "NUL character" else {"south/south-model"}
    fetched = operator_api.post("/api/v1/federation/peers/fetch")

    assert fetched.status_code == 200, fetched.content[:300]
    models = our_models(operator_api)
    assert {"declared/llama", "declared-cpu", "north/north-model"} <= set(models)
    assert {name for name in models if name.startswith("south/")} <= allowed, sorted(models)
    # One peer's garbage does not stop the others being fetched.
    north_peer = our_peers(operator_api)["north"]
    assert "north/north-new" in north_peer["models"]
    assert north_peer["stale"] is False


@pytest.mark.parametrize("garbage", ["not json", "models not a list", "server error", "nested too deep"])
def test_a_peer_answering_garbage_keeps_its_last_offer_and_is_shown_stale(db, settings_file, stub_peers,
                                                                          operator_api, garbage):
    south = stub_peers()
    south.offer([{"name": "south-model", "aliases": [], "description": "", "engine": "vllm"}])
    configure_west(settings_file, [peer_entry(south, name="south", token="t-south")])
    fetch_all_peers(force=True)
    versions = catalog_versions()

    south.answer(*GARBAGE[garbage])
    fetch_all_peers(force=True)

    assert "south/south-model" in our_models(operator_api)
    peer = our_peers(operator_api)["south"]
    assert peer["stale"] is True
    assert peer["last_error"]
    assert catalog_versions() == versions


def test_invalid_models_in_an_offer_are_skipped_and_the_valid_ones_kept(db, settings_file, stub_peers,
                                                                       operator_api):
    south = stub_peers()
    south.offer([
        {"name": "fine", "aliases": ["fine-alias"], "description": "ok", "engine": "vllm"},
        5,
        {"name": "../escape", "aliases": [], "description": "", "engine": "vllm"},
        {"name": "odd-engine", "aliases": [], "description": "", "engine": 7},
        {"name": "x" * 300, "aliases": [], "description": "", "engine": "vllm"},
    ])
    configure_west(settings_file, [peer_entry(south, name="south", token="t-south")])

    assert operator_api.post("/api/v1/federation/peers/fetch").status_code == 200

    models = our_models(operator_api)
    assert {m for m in models if m.startswith("south/")} == {"south/fine"}
    skipped = our_skipped(operator_api)
    assert all(s["kind"] == "federated" for s in skipped.values()), skipped
    assert len(skipped) == 4, skipped


def test_the_same_offer_fetched_again_records_no_version(db, settings_file, stub_peers):
    # A peer that ignores If-None-Match and answers 200 with the same offer.
    south = stub_peers()
    south.offer(GOOD_OFFER)
    configure_west(settings_file, [peer_entry(south, name="south", token="t-south")])
    fetch_all_peers(force=True)
    versions = catalog_versions()

    fetch_all_peers(force=True)
    fetch_all_peers(force=True)

    assert catalog_versions() == versions
    # It was asked with our token, and with the ETag it never gave: none.
    assert south.requests[-1]["authorization"] == "Bearer t-south"
    assert "if-none-match" not in south.requests[-1]
