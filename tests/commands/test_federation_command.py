"""``manage.py federation``: peers, their offers fetched over real HTTP
from a peer in a thread, and this cluster's own offer."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from catalog import selectors
from tests.conftest import TEST_SETTINGS

PEER_TOKEN = "peer-secret-0123456789"
OFFERED = [{"name": "chat-70b", "aliases": ["big"], "description": "", "engine": "vllm"},
           {"name": "embed", "aliases": [], "description": "", "engine": "vllm"}]


class Peer:
    """A peer cluster's offer endpoint; ``models`` is what it offers now."""

    def __init__(self):
        self.models = list(OFFERED)
        self.authorisations = []
        peer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format, *args):
                pass

            def do_GET(self):
                peer.authorisations.append(self.headers.get("Authorization"))
                if self.path != "/api/v1/federation/offer":
                    self.send_response(404)
                    self.end_headers()
                    return
                body = json.dumps({"cluster": "east", "digest": "x", "models": peer.models}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def peer(settings_file):
    """A peer named ``east`` in the cluster settings, serving its offer."""
    running = Peer()
    settings_file.write({**TEST_SETTINGS, "federation": {
        "peers": [{"name": "east", "url": running.url, "token": PEER_TOKEN}], "offer": "all"}})
    yield running
    running.stop()


def test_list_without_peers_says_where_they_are_set(run, db):
    assert "federation.peers" in run("federation", "list")
    assert run.json("federation", "list") == []


def test_a_peer_never_fetched_is_listed_as_stale(run, db, peer):
    (item,) = run.json("federation", "list")

    assert (item["name"], item["url"], item["fetched_at"], item["stale"], item["models"]) == \
        ("east", peer.url, None, True, [])


def test_fetch_gets_every_offer_now_and_puts_its_models_in_the_catalog(run, db, peer):
    printed = run("federation", "fetch")

    lines = printed.splitlines()
    assert lines[0].split() == ["PEER", "URL", "LAST", "FETCH", "STALE", "LAST", "ERROR", "MODELS"]
    row = lines[1].split()
    assert row[:2] == ["east", peer.url]
    assert row[4:] == ["no", "-", "2:", "east/chat-70b,", "east/embed"]
    assert run.stderr == ""
    assert peer.authorisations == [f"Bearer {PEER_TOKEN}"]
    assert selectors.in_force().catalog.resolve("east/big")["name"] == "east/chat-70b"
    (item,) = run.json("federation", "list")
    assert item["stale"] is False and item["models"] == ["east/chat-70b", "east/embed"]
    assert item["fetched_at"].startswith("20") and "T" in item["fetched_at"]
    assert PEER_TOKEN not in printed + json.dumps(item)


def test_a_peer_that_cannot_be_reached_keeps_its_last_offer_and_is_shown_stale(run, db, peer):
    run("federation", "fetch")
    peer.stop()

    (item,) = run.json("federation", "fetch")

    assert item["stale"] is True
    assert item["last_error"]
    assert item["models"] == ["east/chat-70b", "east/embed"]
    assert run.stderr.startswith("peer east: not fetched, its last offer is kept: ")
    assert selectors.in_force().catalog.resolve("east/embed") is not None


def test_offer_lists_what_this_cluster_offers_its_peers(run, db):
    printed = run("federation", "offer")

    assert printed.splitlines()[0].startswith("cluster test offers 2 models to its peers (sha256:")
    assert [line.split()[0] for line in printed.splitlines()[2:]] == ["declared-cpu", "declared/llama"]
    offer = run.json("federation", "offer")
    assert offer["cluster"] == "test"
    assert {m["name"]: m["aliases"] for m in offer["models"]} == {"declared-cpu": [], "declared/llama": ["llama"]}


def test_offer_never_passes_on_a_peers_models(run, db, peer):
    run("federation", "fetch")

    assert {m["name"] for m in run.json("federation", "offer")["models"]} == {"declared-cpu", "declared/llama"}


def test_offer_of_none_says_so(run, db, settings_file):
    settings_file.write({**TEST_SETTINGS, "federation": {"peers": [], "offer": "none"}})

    assert "offers 0 models" in run("federation", "offer")
    assert run.json("federation", "offer")["models"] == []
