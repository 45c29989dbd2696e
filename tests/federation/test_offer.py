"""What a cluster offers its peers: ``GET /api/v1/federation/offer`` (SPEC §6).

Ours is read in-process with a peer's token; east's over HTTP with the
token it shares with us. Either way: local models only, as
``federation.offer`` says, with an ETag, and only to peers and people.
"""

import pytest
from rest_framework.test import APIClient

from catalog.services.federation import fetch_all_peers
from catalog.services.gateways import register_gateway
from tests.federation.peer import (  # noqa: F401  (fixtures)
    EAST_DECLARED,
    EAST_LOCAL,
    configure_west,
    east,
    east_cluster,
    peer_entry,
)

pytestmark = pytest.mark.slow

OFFERED_FIELDS = {"name", "aliases", "description", "engine"}
OURS = {"name": "ours", "aliases": ["ours-latest"], "description": "west's own", "engine": "sglang",
        "source": "hf://west-org/ours", "class": "critical", "owner": "team:ml"}


def _as_peer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def _offered(response) -> dict[str, dict]:
    assert response.status_code == 200, response.content[:500]
    return {m["name"]: m for m in response.json()["models"]}


@pytest.fixture
def west(db, settings_file, east):
    return configure_west(settings_file, [peer_entry(east)])


def test_our_offer_lists_our_own_models_and_never_a_peers(west, east, operator_api):
    assert operator_api.post("/api/v1/models", OURS, format="json").status_code == 201
    fetch_all_peers(force=True)  # east's models are now in our catalog
    assert operator_api.get("/api/v1/models/east/chat").status_code == 200

    response = _as_peer(east.shared_token).get("/api/v1/federation/offer")

    offered = _offered(response)
    assert set(offered) == {"declared/llama", "declared-cpu", "ours"}
    assert response.json()["cluster"] == "west"
    # Only what a peer needs to route a request here: how we run it is ours.
    assert all(set(m) == OFFERED_FIELDS for m in offered.values()), offered
    assert offered["ours"] == {"name": "ours", "aliases": ["ours-latest"], "description": "west's own",
                               "engine": "sglang"}
    assert offered["declared/llama"]["aliases"] == ["llama"]


def test_easts_offer_over_http_lists_its_local_models(east):
    response = east.offer()

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["cluster"] == "east"
    assert {m["name"]: m["aliases"] for m in body["models"]} == EAST_LOCAL
    chat = next(m for m in body["models"] if m["name"] == "chat")
    assert chat == {"name": "chat", "aliases": EAST_DECLARED["aliases"],
                    "description": EAST_DECLARED["description"], "engine": "vllm"}
    assert response.headers["ETag"] == f'"{body["digest"]}"'


def test_offer_none_offers_nothing(db, settings_file, east):
    configure_west(settings_file, [peer_entry(east)], offer="none")

    assert _offered(_as_peer(east.shared_token).get("/api/v1/federation/offer")) == {}


def test_an_offer_list_offers_only_the_local_models_it_names(db, settings_file, east, operator_api):
    configure_west(settings_file, [peer_entry(east)], offer=["declared-cpu", "ours", "east/chat", "no-such-model"])
    assert operator_api.post("/api/v1/models", OURS, format="json").status_code == 201
    fetch_all_peers(force=True)

    offered = _offered(_as_peer(east.shared_token).get("/api/v1/federation/offer"))

    # east/chat is in our catalog, but a peer's model is never offered on.
    assert set(offered) == {"declared-cpu", "ours"}


def test_the_offer_answers_304_until_it_changes(west, east, operator_api):
    peer = _as_peer(east.shared_token)
    first = peer.get("/api/v1/federation/offer")
    etag = first["ETag"]
    assert etag == f'"{first.json()["digest"]}"'

    unchanged = peer.get("/api/v1/federation/offer", HTTP_IF_NONE_MATCH=etag)
    assert unchanged.status_code == 304
    assert unchanged.content == b""
    assert unchanged["ETag"] == etag

    # Fetching east's models changes our catalog but not what we offer.
    fetch_all_peers(force=True)
    assert peer.get("/api/v1/federation/offer", HTTP_IF_NONE_MATCH=etag).status_code == 304

    assert operator_api.post("/api/v1/models", OURS, format="json").status_code == 201
    changed = peer.get("/api/v1/federation/offer", HTTP_IF_NONE_MATCH=etag)
    assert changed.status_code == 200
    assert changed["ETag"] != etag
    assert "ours" in _offered(changed)


def test_easts_offer_answers_304_to_its_etag_over_http(east):
    etag = east.offer().headers["ETag"]

    again = east.offer(etag=etag)

    assert again.status_code == 304
    assert again.content == b""


def test_only_peers_and_people_read_the_offer(west, east, viewer_api, anonymous_api):
    register_gateway(name="gw-1", url="http://127.0.0.1:9", token="gateway-secret-1", by="tests")

    assert anonymous_api.get("/api/v1/federation/offer").status_code == 401
    assert _as_peer("not-a-token-anyone-has").get("/api/v1/federation/offer").status_code == 401
    # A gateway's token reads the catalog, not the offer.
    assert _as_peer("gateway-secret-1").get("/api/v1/federation/offer").status_code == 403
    assert viewer_api.get("/api/v1/federation/offer").status_code == 200
    assert _as_peer(east.shared_token).get("/api/v1/federation/offer").status_code == 200


def test_a_peer_token_reads_the_offer_and_nothing_else(west, east):
    peer = _as_peer(east.shared_token)

    assert peer.get("/api/v1/models").status_code == 403
    assert peer.get("/api/v1/catalog").status_code == 403
    assert peer.get("/api/v1/settings").status_code == 403
    assert peer.get("/api/v1/federation/peers").status_code == 403
    assert peer.post("/api/v1/federation/peers/fetch").status_code == 403
    assert peer.post("/api/v1/models", OURS, format="json").status_code == 403


def test_a_peer_taken_out_of_the_settings_can_no_longer_read_the_offer(db, settings_file, east):
    configure_west(settings_file, [])

    assert _as_peer(east.shared_token).get("/api/v1/federation/offer").status_code == 401


def test_east_refuses_a_token_it_does_not_share(east):
    assert east.offer(token="someone-elses-token").status_code == 401
    response = east.request("GET", "models", token=east.shared_token)
    assert response.status_code == 403
