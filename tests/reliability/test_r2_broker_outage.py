"""Drill R2 (QUALITY.md): Redis stopped while 10 edits are made, then
started. PostgreSQL, a Redis of the drill's own (so the machine's Redis is
not disturbed), a real Celery worker with beat, real HTTP.

Every edit must succeed while the broker is down (the database is the
outbox; a lost nudge is not a lost change), be kept, and reach every
gateway within two reconcile intervals of Redis coming back, plus the
time the worker needs to notice Redis is back.
"""

from __future__ import annotations

import time

import pytest

from catalog import selectors
from catalog.models import CatalogVersion, StoredModel
from tests.reliability.cluster import (  # noqa: F401  (fixtures)
    RECONCILE_SECONDS,
    celery_workers,
    converged,
    describe,
    gateway_fleet,
    private_redis,
    wait_until,
)

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SOURCE = "hf://acme/chat-7b"
EDITS = 10
# Two reconcile intervals (QUALITY.md), and the slack a worker and beat
# need to find their broker again: kombu retries the lost connection after
# 2 s, then 4 s, … so a reconnect lands up to a few seconds after Redis.
CONVERGE_SECONDS = 2 * RECONCILE_SECONDS + 12



def edit(api, i: int):
    """Adds, and changes to a model added before the outage."""
    if i % 3 == 2:
        return api.patch("/api/v1/models/r2/base", {"scaling": {"min": 1, "max": 10 + i}}, format="json")
    return api.post("/api/v1/models", {"name": f"r2/m{i}", "source": SOURCE}, format="json")


def test_edits_made_while_redis_is_down_succeed_and_reach_every_gateway_once_it_is_back(
        private_redis, celery_workers, gateway_fleet, operator_api):
    fleet = [gateway_fleet(f"r2-gw{i}") for i in range(3)]
    state = describe(fleet)
    worker = celery_workers(private_redis.url)
    assert operator_api.post("/api/v1/models", {"name": "r2/base", "source": SOURCE}, format="json"
                             ).status_code == 201
    wait_until(lambda: converged(fleet), timeout=20, what="the gateways apply the edit made before the outage",
               describe=state)
    before = selectors.latest_catalog_version().version

    private_redis.stop()
    started = time.monotonic()
    answers = [edit(operator_api, i) for i in range(EDITS)]
    took = time.monotonic() - started

    assert [a.status_code for a in answers] == [200 if i % 3 == 2 else 201 for i in range(EDITS)], \
        [a.content for a in answers]
    # Not a benchmark: an edit that waited for the broker's retries to run
    # out (kombu's default is to retry for ever) would be far beyond this.
    assert took < EDITS * 5, f"{EDITS} edits took {took:.1f}s with Redis down"
    adds = {f"r2/m{i}" for i in range(EDITS) if i % 3 != 2}
    assert adds <= set(StoredModel.objects.values_list("name", flat=True))
    assert selectors.latest_catalog_version().version == before + EDITS
    assert {g.version for g in fleet} == {before}, "a gateway got a catalog while the broker was down"

    private_redis.start()
    back = time.monotonic()
    wait_until(lambda: converged(fleet), timeout=CONVERGE_SECONDS,
               what="every gateway applies the newest catalog after Redis is back",
               describe=lambda: f"{state()}\n{worker.tail()}")
    print(f"R2: converged {time.monotonic() - back:.1f}s after Redis came back; edits took {took:.2f}s")

    newest = CatalogVersion.objects.order_by("-version").first()
    served = {m["name"]: m for m in fleet[0].receiver.applied["models"]}
    assert adds <= set(served) and served["r2/base"]["scaling"]["max"] == 10 + max(i for i in range(EDITS) if i % 3 == 2)
    assert all(g.receiver.applied["version"] == newest.version for g in fleet)
