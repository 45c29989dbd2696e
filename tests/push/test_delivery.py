"""Delivering catalogs to gateways (SPEC §5): what each answer of a gateway
does to its state, over real HTTP to reference gateways in threads.

Tasks run inline here (tests/conftest.py); an API write delivers when its
transaction's on-commit callbacks run, so writes that should publish go
through ``publishing()``. The drills in tests/reliability run the same
paths with a real worker.
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.utils import timezone

from catalog import push, selectors, tasks
from catalog.models import Gateway
from catalog.services import gateways as gateway_services
from tests.reliability.cluster import free_port, gateway_fleet  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db

SOURCE = "hf://acme/chat-7b"
DOCUMENT_FIELDS = {"version", "digest", "created_at", "settings_version", "models"}



@pytest.fixture
def publishing(django_capture_on_commit_callbacks):
    """``with publishing():`` runs what the transactions inside queued on
    commit (the publish to every gateway), as a committed write would."""
    return lambda: django_capture_on_commit_callbacks(execute=True)


def add(api, name: str) -> None:
    response = api.post("/api/v1/models", {"name": name, "source": SOURCE}, format="json")
    assert response.status_code == 201, response.content


def first_catalog(viewer_api):
    assert viewer_api.get("/api/v1/catalog").status_code == 200
    return selectors.latest_catalog_version()


def backoff_elapses(gateway) -> None:
    """Time passes: the gateway's next attempt is due."""
    Gateway.objects.filter(name=gateway.name).update(next_attempt_at=timezone.now() - timedelta(seconds=1))


def reconcile() -> int:
    return tasks.reconcile.apply().get()


# --- end to end ---------------------------------------------------------------

def test_three_gateways_converge_on_the_catalog_the_console_serves(operator_api, viewer_api, gateway_fleet,
                                                                   publishing):
    fleet = [gateway_fleet(f"gw-{i}") for i in range(3)]

    with publishing():
        add(operator_api, "acme/chat")

    served = viewer_api.get("/api/v1/catalog")
    document = json.loads(served.content)
    assert set(document) == DOCUMENT_FIELDS
    assert [m["name"] for m in document["models"]] == sorted(m["name"] for m in document["models"])
    assert "acme/chat" in [m["name"] for m in document["models"]]
    for gateway in fleet:
        assert gateway.receiver.applied == document
        assert (gateway.version, gateway.receiver.digest) == (document["version"], document["digest"])
        assert served["ETag"] == f'"{gateway.receiver.digest}"'
        row = gateway.row()
        assert (row.acked_version, row.acked_digest) == (document["version"], document["digest"])
        assert gateway.state() == "in_sync" and row.last_seen is not None and row.last_error == ""


def test_an_edit_succeeds_while_a_gateway_is_unreachable(operator_api, viewer_api, publishing):
    gateway_services.register_gateway(name="gone", url=f"http://127.0.0.1:{free_port()}",
                                      token="tok-gone-0123456789abcdef", by="tests")

    with publishing():
        add(operator_api, "acme/chat")

    assert "acme/chat" in [m["name"] for m in json.loads(viewer_api.get("/api/v1/catalog").content)["models"]]
    assert viewer_api.get("/api/v1/gateways/gone").json()["state"] == "failing"


# --- one delivery ---------------------------------------------------------------

def test_an_acknowledged_delivery_puts_the_gateway_in_sync_and_a_second_sends_nothing(viewer_api, gateway_fleet):
    gateway = gateway_fleet("gw-1")
    latest = first_catalog(viewer_api)

    assert gateway_services.deliver(gateway.row().pk) == "acked"

    assert gateway.receiver.applied_versions() == [latest.version]
    row = gateway.row()
    assert (row.acked_version, row.acked_digest, row.failures) == (latest.version, latest.digest, 0)
    assert gateway.state() == "in_sync"
    assert gateway_services.deliver(row.pk) == "in_sync"
    assert gateway.received == 1


def test_a_delivery_sends_only_the_newest_version_at_send_time(operator_api, viewer_api, gateway_fleet):
    gateway = gateway_fleet("gw-1")
    first_catalog(viewer_api)
    add(operator_api, "acme/one")  # plain `db`: nothing is published on commit
    add(operator_api, "acme/two")
    latest = selectors.latest_catalog_version()
    assert latest.version >= 3

    gateway_services.deliver(gateway.row().pk)

    assert gateway.receiver.sent_versions() == [latest.version]
    assert gateway.receiver.digest == latest.digest


def test_the_push_carries_the_token_version_and_digest_headers(viewer_api):
    seen = []

    class Recorder(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):
            pass

        def do_PUT(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append((self.command, self.path, dict(self.headers), body))
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        token = "tok-headers-0123456789abcdef"
        gateway = gateway_services.register_gateway(name="recorder", token=token, by="tests",
                                                    url=f"http://127.0.0.1:{server.server_address[1]}/base/")
        served = viewer_api.get("/api/v1/catalog")
        latest = selectors.latest_catalog_version()

        assert gateway_services.deliver(gateway.pk) == "acked"  # 204 is an acknowledgement too
    finally:
        server.shutdown()
        server.server_close()

    [(method, path, headers, body)] = seen
    assert (method, path) == ("PUT", "/base/v1/catalog")
    assert headers["Authorization"] == f"Bearer {token}"
    assert headers["X-Llmgw-Catalog-Version"] == str(latest.version)
    assert headers["X-Llmgw-Catalog-Digest"] == latest.digest
    assert headers["Content-Type"] == "application/json"
    assert body == served.content  # byte for byte what the digest was computed over
    assert Gateway.objects.get(name="recorder").acked_version == latest.version


# --- what each answer does ------------------------------------------------------

def test_a_gateway_that_already_has_the_version_answers_409_and_is_recorded_in_sync(viewer_api, gateway_fleet):
    """The acknowledgement was lost (a worker died after the gateway applied
    it): the next delivery is answered 409 with the version it has."""
    gateway = gateway_fleet("gw-1")
    latest = first_catalog(viewer_api)
    applied = push.push(gateway.url, gateway.token, version=latest.version, digest=latest.digest,
                        body=selectors.catalog_document_bytes(latest), timeout=5)
    assert applied.kind == push.ACKED and gateway.row().acked_version is None

    assert gateway_services.deliver(gateway.row().pk) == "acked"

    assert gateway.receiver.log[-1].status == 409
    assert gateway.receiver.applied_versions() == [latest.version]  # nothing applied twice
    row = gateway.row()
    assert (row.acked_version, row.acked_digest) == (latest.version, latest.digest)
    assert gateway.state() == "in_sync"


def test_a_409_that_names_no_newer_version_is_a_failure(viewer_api, gateway_fleet):
    gateway = gateway_fleet("gw-1", faults={"status": 409})
    first_catalog(viewer_api)

    assert gateway_services.deliver(gateway.row().pk) == "retry"

    row = gateway.row()
    assert row.acked_version is None and "409" in row.last_error
    assert gateway.state() == "failing"


def test_an_acknowledgement_never_moves_the_recorded_version_back(operator_api, viewer_api, gateway_fleet):
    gateway = gateway_fleet("gw-1")
    older = first_catalog(viewer_api)
    add(operator_api, "acme/one")
    gateway_services.deliver(gateway.row().pk)
    newer = selectors.latest_catalog_version()

    gateway_services._record_ack(gateway.row(), older.version, older.digest)  # a late answer

    row = gateway.row()
    assert (row.acked_version, row.acked_digest) == (newer.version, newer.digest)


def test_a_rejected_version_is_recorded_with_the_reason_and_not_retried(operator_api, viewer_api, admin_api,
                                                                        gateway_fleet, publishing):
    gateway = gateway_fleet("gw-1", faults={"reject": True})
    latest = first_catalog(viewer_api)

    assert gateway_services.deliver(gateway.row().pk) == "rejected"

    shown = viewer_api.get("/api/v1/gateways/gw-1").json()
    assert shown["state"] == "rejected" and shown["acked_version"] is None
    assert f"version {latest.version}" in shown["last_error"] and "rejected (fault injected)" in shown["last_error"]
    assert gateway.row().pk not in gateway_services.due_for_delivery()
    assert reconcile() == 0
    assert gateway_services.deliver(gateway.row().pk) == "rejected"
    assert gateway.received == 1  # asked once, never again for that version

    gateway.set_faults({})
    with publishing():
        add(operator_api, "acme/fixed")

    assert gateway.received == 2
    newer = selectors.latest_catalog_version()
    shown = viewer_api.get("/api/v1/gateways/gw-1").json()
    assert (shown["state"], shown["acked_version"], shown["last_error"]) == ("in_sync", newer.version, None)


def test_a_gateway_answering_500_is_failing_with_backoff_then_converges_once_healed(viewer_api, gateway_fleet):
    gateway = gateway_fleet("gw-1", faults={"status": 500})
    latest = first_catalog(viewer_api)
    before = timezone.now()

    assert gateway_services.deliver(gateway.row().pk) == "retry"

    row = gateway.row()
    assert gateway.state() == "failing" and row.failures == 1
    assert "HTTP 500" in row.last_error and row.acked_version is None
    assert row.next_attempt_at > before
    assert row.pk not in gateway_services.due_for_delivery()  # it waits its backoff
    assert reconcile() == 0 and gateway.received == 1

    gateway.set_faults({})
    backoff_elapses(gateway)
    assert reconcile() == 1

    row = gateway.row()
    assert gateway.state() == "in_sync" and row.acked_version == latest.version
    assert (row.failures, row.last_error, row.next_attempt_at) == (0, "", None)


def test_a_gateway_that_hangs_past_the_timeout_is_failing_then_converges_once_healed(viewer_api, gateway_fleet,
                                                                                    settings):
    settings.LLMGW_PUSH_TIMEOUT_SECONDS = 1
    gateway = gateway_fleet("gw-1", faults={"delay": 3})
    latest = first_catalog(viewer_api)

    assert gateway_services.deliver(gateway.row().pk) == "retry"

    row = gateway.row()
    assert gateway.state() == "failing" and "no answer within 1s" in row.last_error
    assert row.next_attempt_at > timezone.now() - timedelta(seconds=1)

    gateway.set_faults({})
    backoff_elapses(gateway)
    assert reconcile() == 1
    assert gateway.state() == "in_sync" and gateway.row().acked_version == latest.version


def test_an_unreachable_gateway_is_failing_then_converges_once_it_listens(viewer_api, gateway_fleet):
    port = free_port()
    token = "tok-later-0123456789abcdef"
    gateway_services.register_gateway(name="later", url=f"http://127.0.0.1:{port}", token=token, by="tests")
    latest = first_catalog(viewer_api)
    pk = Gateway.objects.get(name="later").pk

    assert gateway_services.deliver(pk) == "retry"
    row = Gateway.objects.get(pk=pk)
    assert "cannot reach the gateway" in row.last_error and row.next_attempt_at > timezone.now()

    gateway = gateway_fleet("later", register=False, port=port, token=token)
    backoff_elapses(gateway)
    assert reconcile() == 1
    assert gateway.state() == "in_sync" and gateway.version == latest.version


def test_failures_back_off_exponentially_up_to_the_cap_never_zero(settings):
    settings.LLMGW_PUSH_BACKOFF_MAX_SECONDS = 8
    waits = {failures: [gateway_services.backoff_seconds(failures) for _ in range(200)] for failures in (1, 3, 30)}

    assert all(1 <= w <= 8 for ws in waits.values() for w in ws)
    assert max(waits[1]) <= 1 < max(waits[3])  # it grows with the failures
    assert max(waits[30]) == 8  # and stops at the cap


def test_a_gateway_refusing_the_token_is_failing_until_the_token_is_fixed(admin_api, viewer_api, gateway_fleet,
                                                                          publishing):
    gateway = gateway_fleet("gw-1", register=False)
    gateway_services.register_gateway(name="gw-1", url=gateway.url, token="tok-wrong-0123456789abcdef", by="tests")
    latest = first_catalog(viewer_api)

    assert gateway_services.deliver(gateway.row().pk) == "retry"
    assert "refused the token (401)" in gateway.row().last_error and gateway.version == 0

    with publishing():  # a fixed token is tried at once, whatever the backoff
        response = admin_api.patch("/api/v1/gateways/gw-1", {"token": gateway.token}, format="json")

    assert response.status_code == 200
    assert gateway.state() == "in_sync" and gateway.version == latest.version


def test_a_disabled_gateway_is_not_delivered_to_until_enabled(operator_api, admin_api, viewer_api, gateway_fleet,
                                                              publishing):
    gateway = gateway_fleet("gw-off", enabled=False)

    with publishing():
        add(operator_api, "acme/chat")

    assert gateway.received == 0 and gateway.row().acked_version is None
    assert gateway_services.due_for_delivery() == [] and reconcile() == 0
    assert gateway_services.deliver(gateway.row().pk) == "disabled"
    assert gateway.received == 0

    with publishing():
        admin_api.patch("/api/v1/gateways/gw-off", {"enabled": True}, format="json")

    assert gateway.state() == "in_sync" and gateway.version == selectors.latest_catalog_version().version


def test_push_now_delivers_at_once_whatever_the_backoff(operator_api, viewer_api, gateway_fleet, publishing):
    gateway = gateway_fleet("gw-1", faults={"status": 503})
    latest = first_catalog(viewer_api)
    gateway_services.deliver(gateway.row().pk)
    assert gateway.row().next_attempt_at is not None
    gateway.set_faults({})

    with publishing():
        response = operator_api.post("/api/v1/gateways/gw-1/push")

    assert response.status_code == 202
    assert gateway.state() == "in_sync" and gateway.version == latest.version
