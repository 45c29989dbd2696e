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
    outcome = gateways.deliver(gateway_id)
    if outcome == "retry" and not self.app.conf.task_always_eager:
        # The backoff the service recorded (next_attempt_at) is the delay;
        # if this retry is lost, the reconcile picks the gateway up then.
        from .models import Gateway

        gateway = Gateway.objects.filter(pk=gateway_id).only("failures").first()
        if gateway is not None:
            enqueue(deliver_catalog, gateway_id, countdown=gateways.backoff_seconds(gateway.failures))
    return outcome


@shared_task(acks_late=True, ignore_result=True)
def reconcile() -> int:
    """Queue a delivery to every gateway that is behind (Celery beat)."""
    due = gateways.due_for_delivery()
    for gateway_id in due:
        enqueue(deliver_catalog, gateway_id)
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
