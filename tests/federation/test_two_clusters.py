"""Two clusters federating both ways over HTTP (SPEC §6).

East is a console in its own process; west is this process, reachable over
HTTP (WestOverHttp) while east fetches from it. Each sees the other's
models as PEER/MODEL, and neither offers on what it fetched, so a request
can never bounce between them. The ``east`` fixture puts east back
(running, with its own runtime models) after each test.
"""

import pytest

from catalog import selectors
from catalog.services.federation import fetch_all_peers
from tests.federation.peer import (  # noqa: F401  (fixtures)
    EAST_LOCAL,
    catalog_versions,
    configure_west,
    east,
    east_cluster,
    our_models,
    our_peers,
    peer_entry,
    west_over_http,
)

pytestmark = pytest.mark.slow

EAST_FEDERATED = {f"east/{name}" for name in EAST_LOCAL}


def test_two_clusters_see_each_others_models_and_never_offer_them_on(db, settings_file, east, west_over_http,
                                                                      operator_api):
    configure_west(settings_file, [peer_entry(east)])
    east.set_setting("federation.peers.0.url", west_over_http.url)
    fetch_all_peers(force=True)
    ours = {"name": "ours", "source": "hf://west-org/ours", "fallbacks": ["east/chat"]}
    assert operator_api.post("/api/v1/models", ours, format="json").status_code == 201

    # East fetches our offer, over HTTP, with the token we share.
    fetched = west_over_http.while_serving(lambda: east.request("POST", "federation/peers/fetch"))

    assert fetched.status_code == 200, fetched.text
    assert "/api/v1/federation/offer" in west_over_http.seen
    west_on_east = {p["name"]: p for p in fetched.json()["results"]}["west"]
    assert west_on_east["stale"] is False
    # Ours, and not east's own models that we fetched: those stay east's.
    assert east.catalog_names(peer="west") == {"west/declared/llama", "west/declared-cpu", "west/ours"}

    # What east offers us back is its own models only, and so what we
    # fetch again has nothing of ours in it.
    assert {m["name"] for m in east.offer().json()["models"]} == set(EAST_LOCAL)
    fetch_all_peers(force=True)
    assert {n for n in our_models(operator_api) if n.startswith("east/")} == EAST_FEDERATED

    # East can lean on our model as we lean on its one.
    east.add_model({"name": "edge", "source": "hf://east-org/edge", "fallbacks": ["west/ours"]})
    assert east.checked("GET", "models/west/ours", 200).json()["used_by"]["fallback_of"] == ["edge"]
    fetch_all_peers(force=True)
    assert "east/edge" in our_models(operator_api)


def test_a_stopped_peer_keeps_its_last_offer_until_it_answers_again(db, settings_file, east, operator_api):
    configure_west(settings_file, [peer_entry(east)])
    fetch_all_peers(force=True)
    leaning = {"name": "ours", "source": "hf://west-org/ours", "fallbacks": ["east/bar"]}
    assert operator_api.post("/api/v1/models", leaning, format="json").status_code == 201
    versions = catalog_versions()
    fetched_at = our_peers(operator_api)["east"]["fetched_at"]

    port = east.port
    east.stop()
    fetch_all_peers(force=True)

    # A peer that is down is not a peer that dropped its models: ours,
    # which falls back to one of them, stays.
    models = our_models(operator_api)
    assert EAST_FEDERATED | {"ours"} <= set(models)
    peer = our_peers(operator_api)["east"]
    assert peer["stale"] is True
    assert peer["last_error"]
    assert peer["fetched_at"] == fetched_at
    assert catalog_versions() == versions

    east.start(port=port)
    fetch_all_peers(force=True)

    peer = our_peers(operator_api)["east"]
    assert peer["stale"] is False
    assert peer["last_error"] is None
    assert peer["fetched_at"] != fetched_at
    # It came back with the same offer: nothing to record.
    assert catalog_versions() == versions
    assert EAST_FEDERATED | {"ours"} <= set(our_models(operator_api))
    assert not selectors.in_force().catalog.skipped
