"""Drill R3 (QUALITY.md): gateways that answer 500 for a while, hang past
the push timeout, or reject with 422. PostgreSQL, Redis, a real Celery
worker with beat, real HTTP.

Must hold: the states are failing / failing / rejected while a healthy
gateway is in sync; once the first two recover they converge without
anyone acting; the rejected version is never sent again, however many
reconcile runs pass.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from catalog import selectors
from tests.reliability.cluster import (  # noqa: F401  (fixtures)
    PUSH_TIMEOUT_SECONDS,
    celery_workers,
    converged,
    describe,
    flush_broker,
    gateway_fleet,
    wait_until,
)

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SOURCE = "hf://acme/chat-7b"



def states(api: APIClient) -> dict[str, dict]:
    return {g["name"]: g for g in api.get("/api/v1/gateways").json()["results"]}


def test_failing_and_rejecting_gateways_show_it_and_the_failing_ones_recover_alone(settings, celery_workers,
                                                                                  gateway_fleet, operator_api,
                                                                                  viewer_api):
    flush_broker(settings.CELERY_BROKER_URL)
    erroring = gateway_fleet("r3-500", faults={"status": 500})
    hanging = gateway_fleet("r3-hang", faults={"delay": PUSH_TIMEOUT_SECONDS + 2})
    rejecting = gateway_fleet("r3-422", faults={"reject": True})
    healthy = gateway_fleet("r3-ok")
    fleet = [erroring, hanging, rejecting, healthy]
    worker = celery_workers(settings.CELERY_BROKER_URL)
    state = describe(fleet)
    state_and_log = lambda: f"{state()}\n{worker.tail()}"  # noqa: E731

    assert operator_api.post("/api/v1/models", {"name": "r3/edit", "source": SOURCE}, format="json"
                             ).status_code == 201
    latest = selectors.latest_catalog_version()

    expected = {"r3-500": "failing", "r3-hang": "failing", "r3-422": "rejected", "r3-ok": "in_sync"}
    wait_until(lambda: {n: g["state"] for n, g in states(viewer_api).items()} == expected, timeout=20,
               what=f"the gateways' states become {expected}", describe=state_and_log)
    shown = states(viewer_api)
    assert "HTTP 500" in shown["r3-500"]["last_error"]
    assert f"no answer within {PUSH_TIMEOUT_SECONDS}s" in shown["r3-hang"]["last_error"]
    assert f"version {latest.version} rejected" in shown["r3-422"]["last_error"]
    assert shown["r3-ok"]["acked_version"] == latest.version
    rejected_pushes = rejecting.received

    erroring.set_faults({})
    hanging.set_faults({})

    wait_until(lambda: converged([erroring, hanging, healthy]), timeout=20,
               what="the recovered gateways converge without anyone acting", describe=state_and_log)
    # What an operator sees: in sync and the old error gone, together (an
    # acknowledgement is recorded in one statement).
    shown = states(viewer_api)
    assert [(shown[n]["state"], shown[n]["last_error"]) for n in ("r3-500", "r3-hang")] == [("in_sync", None)] * 2
    # Every reconcile run in between passed over the rejected gateway.
    runs = worker.reconciles()
    wait_until(lambda: worker.reconciles() >= runs + 2, timeout=10, what="two more reconcile runs",
               describe=worker.tail)
    assert rejecting.received == rejected_pushes
    assert rejecting.receiver.sent_versions().count(latest.version) == 1
    assert states(viewer_api)["r3-422"]["state"] == "rejected"

    # A newer version is worth sending: the rejecting gateway, fixed, takes it.
    rejecting.set_faults({})
    assert operator_api.post("/api/v1/models", {"name": "r3/next", "source": SOURCE}, format="json"
                             ).status_code == 201
    wait_until(lambda: converged(fleet), timeout=20, what="every gateway takes the next version",
               describe=state_and_log)
