"""Drill R4 (QUALITY.md): the Celery worker killed with SIGKILL during
deliveries, then restarted. PostgreSQL, Redis, real workers (prefork, with
beat), real HTTP.

Every gateway answers after half a second, so deliveries are on the wire
when the worker's whole process group is killed. Must hold: every gateway
converges on the newest catalog once a new worker runs, no gateway ever
applies an older version after a newer one, and the new worker sends each
gateway versions in order.
"""

from __future__ import annotations

import time

import pytest

from catalog import selectors
from tests.reliability.cluster import (  # noqa: F401  (fixtures)
    celery_workers,
    converged,
    describe,
    flush_broker,
    gateway_fleet,
    wait_until,
)

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SOURCE = "hf://acme/chat-7b"
GATEWAYS = 4



def add(api, name: str) -> None:
    response = api.post("/api/v1/models", {"name": name, "source": SOURCE}, format="json")
    assert response.status_code == 201, response.content


def test_a_worker_killed_mid_delivery_leaves_no_gateway_behind_or_moved_back(settings, celery_workers,
                                                                            gateway_fleet, operator_api):
    flush_broker(settings.CELERY_BROKER_URL)
    fleet = [gateway_fleet(f"r4-gw{i}", faults={"delay": 0.5}) for i in range(GATEWAYS)]
    state = describe(fleet)
    first = celery_workers(settings.CELERY_BROKER_URL, pool="prefork", concurrency=2)

    for i in range(3):
        add(operator_api, f"r4/before-{i}")
    wait_until(lambda: any(g.receiver.in_flight for g in fleet), timeout=20, what="a delivery is in flight",
               describe=lambda: f"{state()}\n{first.tail()}")
    first.kill()
    killed_at = time.monotonic()
    assert sum(g.receiver.in_flight for g in fleet) > 0, "the worker was not killed mid-delivery"
    assert not converged(fleet)

    for i in range(2):  # edits while no worker runs: their nudges wait in Redis
        add(operator_api, f"r4/during-{i}")
    second = celery_workers(settings.CELERY_BROKER_URL, pool="prefork", concurrency=2)

    wait_until(lambda: converged(fleet), timeout=25, what="every gateway converges after the restart",
               describe=lambda: f"{state()}\n{second.tail()}\n{first.tail(15)}")
    latest = selectors.latest_catalog_version()
    for gateway in fleet:
        applied = gateway.receiver.applied_versions()
        assert applied == sorted(set(applied)) and applied[-1] == latest.version, (gateway.name, applied)
        # Everything that reached it after the kill came from the new worker,
        # one delivery at a time, each the newest at its send time.
        sent = gateway.receiver.sent_versions(since=killed_at)
        assert sent == sorted(sent), (gateway.name, sent)
        assert gateway.row().acked_version == latest.version
