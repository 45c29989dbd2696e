"""Drill R5 (QUALITY.md): an old delivery arriving late never downgrades a
gateway. PostgreSQL, Redis, a real Celery worker with beat, real HTTP.

A gateway that already applied version N+1 is sent version N's document
again, as a delivery that took the long way would arrive: it answers 409
with the version it keeps, and the console's record of what it
acknowledged never moves back either.
"""

from __future__ import annotations

import httpx
import pytest

from catalog import push, selectors
from catalog.models import Gateway
from catalog.services import gateways as gateway_services
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


def add(api, name: str) -> None:
    response = api.post("/api/v1/models", {"name": name, "source": SOURCE}, format="json")
    assert response.status_code == 201, response.content


def test_a_late_older_delivery_is_answered_409_and_nothing_moves_back(settings, celery_workers, gateway_fleet,
                                                                       operator_api):
    flush_broker(settings.CELERY_BROKER_URL)
    gateway = gateway_fleet("r5-gateway")
    celery_workers(settings.CELERY_BROKER_URL)
    state = describe([gateway])

    add(operator_api, "r5/first")
    wait_until(lambda: converged([gateway]), timeout=20, what="the gateway applies the first edit", describe=state)
    older = selectors.latest_catalog_version()
    add(operator_api, "r5/second")
    wait_until(lambda: converged([gateway]), timeout=20, what="the gateway applies the second edit", describe=state)
    newer = selectors.latest_catalog_version()
    assert newer.version > older.version

    late = push.push(gateway.url, gateway.token, version=older.version, digest=older.digest,
                     body=selectors.catalog_document_bytes(older), timeout=5)

    assert (late.kind, late.status, late.gateway_version) == (push.NEWER, 409, newer.version)
    served = httpx.get(f"{gateway.url}/v1/catalog", headers={"Authorization": f"Bearer {gateway.token}"}).json()
    assert (served["version"], served["digest"]) == (newer.version, newer.digest)
    applied = gateway.receiver.applied_versions()
    assert applied == sorted(set(applied)) and applied[-1] == newer.version

    # The console's side of the same race: the answer to the older
    # delivery is recorded after the newer acknowledgement.
    gateway_services._record_ack(gateway.row(), older.version, older.digest)
    row = gateway.row()
    assert (row.acked_version, row.acked_digest) == (newer.version, newer.digest)
    assert gateway.state() == "in_sync"


def test_a_lost_acknowledgement_is_recovered_without_reapplying(settings, celery_workers, gateway_fleet,
                                                                 operator_api):
    """The worker died after the gateway applied version N+1 and before the
    console recorded it: the reconcile sends N+1 again, the gateway answers
    409 with N+1, and the console records the acknowledgement."""
    flush_broker(settings.CELERY_BROKER_URL)
    gateway = gateway_fleet("r5-lost-ack")
    celery_workers(settings.CELERY_BROKER_URL)
    state = describe([gateway])
    add(operator_api, "r5/first")
    wait_until(lambda: converged([gateway]), timeout=20, what="the gateway applies the first edit", describe=state)
    older = selectors.latest_catalog_version()
    add(operator_api, "r5/second")
    wait_until(lambda: converged([gateway]), timeout=20, what="the gateway applies the second edit", describe=state)
    newer = selectors.latest_catalog_version()
    applied = gateway.receiver.applied_versions()
    received = gateway.received

    Gateway.objects.filter(name=gateway.name).update(acked_version=older.version, acked_digest=older.digest)

    wait_until(lambda: gateway.row().acked_version == newer.version, timeout=20,
               what="the reconcile finds the gateway behind and records its acknowledgement", describe=state)
    assert gateway.received > received  # it was asked again, not assumed
    assert gateway.receiver.applied_versions() == applied  # and applied nothing twice
    row = gateway.row()
    assert row.acked_digest == newer.digest and gateway.state() == "in_sync"
