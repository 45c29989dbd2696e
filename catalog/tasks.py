"""Celery tasks: thin, idempotent doors into the delivery service.

They carry nudges, not state: a task reads the newest state when it runs,
so a lost, duplicated or late task changes nothing but timing. With no
broker (the embedded default) the same work runs in the console's own
background thread, or inline when LLMGW_TASKS_INLINE is set (tests).
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from .services import gateways

log = logging.getLogger("llmgw.delivery")


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def deliver_catalog(self, gateway_id: int) -> str:
    """Bring one gateway to the newest catalog version."""
    return _deliver(self, [gateway_id])[gateway_id]


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def deliver_to_gateways(self, gateway_ids: list[int] | None = None) -> dict:
    """Bring these gateways (every enabled one when None) to the newest
    catalog version, pushing to several at once."""
    return _deliver(self, gateway_ids)


def _deliver(task, gateway_ids: list[int] | None) -> dict:
    # In a worker, pushes run side by side on their own connections; inline
    # (tests, commands) they run one after another in the caller's
    # transaction, which other threads could not see.
    inline = task.app.conf.task_always_eager and settings.LLMGW_TASKS_INLINE
    outcomes = gateways.deliver_to_many(gateway_ids, parallel=not inline)
    if not task.app.conf.task_always_eager:
        _schedule_retries([gid for gid, outcome in outcomes.items() if outcome == "retry"])
    return outcomes


def _schedule_retries(gateway_ids: list[int]) -> None:
    """One retry per failed gateway after its backoff (recorded by the
    service as next_attempt_at); if a retry is lost, the reconcile picks
    the gateway up then."""
    from .models import Gateway

    for gateway_id, failures in Gateway.objects.filter(pk__in=gateway_ids).values_list("pk", "failures"):
        enqueue(deliver_catalog, gateway_id, countdown=gateways.backoff_seconds(failures))


@shared_task(acks_late=True, ignore_result=True)
def reconcile() -> int:
    """Deliver to every gateway that is behind and due (Celery beat)."""
    due = gateways.due_for_delivery()
    if due:
        enqueue(deliver_to_gateways, due)
    return len(due)


def enqueue(task, *args, countdown: float | None = None) -> None:
    """Queue a task; never raise. A broker that is down loses the nudge,
    not the change: the database keeps it and the reconcile delivers it."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        if settings.LLMGW_TASKS_INLINE:
            task.apply(args=args)
        else:
            from . import embedded

            embedded.submit(task, *args, delay=countdown or 0)
        return
    try:
        task.apply_async(args=args, countdown=countdown)
    except Exception as exc:  # any broker failure means the same thing here
        log.warning("could not queue %s%s (the reconcile will catch up): %s", task.name, args, exc)


@shared_task(acks_late=True, ignore_result=True)
def fetch_peer_offers() -> int:
    """Fetch what every peer cluster offers (Celery beat)."""
    from .services.federation import fetch_all_peers

    return fetch_all_peers()
