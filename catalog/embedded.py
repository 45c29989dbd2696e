"""The console's own worker thread, for the embedded default (no broker).

`make run` has no Celery worker and no beat; deliveries and the periodic
reconcile run here instead, so gateways still converge on a laptop. A
delivery must not run in the request that caused it: a gateway that is
down would hold the browser for the push timeout.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time

from django.conf import settings
from django.db import close_old_connections

log = logging.getLogger("llmgw.delivery")

_lock = threading.Condition()
_queue: list[tuple[float, int, object, tuple]] = []
_counter = itertools.count()
_thread: threading.Thread | None = None


def submit(task, *args, delay: float = 0) -> None:
    ensure_started()
    with _lock:
        heapq.heappush(_queue, (time.monotonic() + delay, next(_counter), task, args))
        _lock.notify()


def ensure_started() -> None:
    global _thread
    with _lock:
        if _thread is not None and _thread.is_alive():
            return
        _thread = threading.Thread(target=_run, name="llmgw-embedded-worker", daemon=True)
        _thread.start()


def _run() -> None:
    from . import tasks

    next_reconcile = next_fetch = time.monotonic()
    while True:
        with _lock:
            now = time.monotonic()
            if now >= next_reconcile:
                job = (tasks.reconcile, ())
                next_reconcile = now + settings.LLMGW_RECONCILE_SECONDS
            elif now >= next_fetch:
                job = (tasks.fetch_peer_offers, ())
                next_fetch = now + settings.LLMGW_FEDERATION_SECONDS
            elif _queue and _queue[0][0] <= now:
                _, _, task, args = heapq.heappop(_queue)
                job = (task, args)
            else:
                wake = min(next_reconcile, next_fetch, *([_queue[0][0]] if _queue else []))
                _lock.wait(timeout=max(wake - now, 0.05))
                continue
        task, args = job
        try:
            close_old_connections()
            task.apply(args=args)
        except Exception:  # keep the thread alive whatever one job does
            log.exception("embedded worker: %s failed", getattr(task, "name", task))
        finally:
            close_old_connections()


class EmbeddedWorkerMiddleware:
    """Starts the embedded worker with the first request of a console that
    has no broker, so the reconcile runs even before anyone edits."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.enabled = settings.CELERY_TASK_ALWAYS_EAGER and not settings.LLMGW_TASKS_INLINE

    def __call__(self, request):
        if self.enabled:
            ensure_started()
        return self.get_response(request)
