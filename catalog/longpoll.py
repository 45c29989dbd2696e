"""Waiting for a newer catalog version without holding a database connection.

A gateway that pulls with ``?after=N&wait=S`` is answered as soon as a
version newer than N exists. While it waits, the request holds no database
connection (a hundred waiting gateways must not exhaust PostgreSQL's
connections): it listens on Redis for the nudge the console publishes after
each new version, and looks at the database again at most once a second in
case the nudge was lost or there is no Redis.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.db import connection

from .models import CatalogVersion

log = logging.getLogger("llmgw.catalog")

CHANNEL = "llmgw:catalog-versions"
RECHECK_SECONDS = 1.0


def _redis():
    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://")):
        return None
    import redis

    return redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)


def announce(version: int) -> None:
    """Tell waiting pulls that a version exists. Best effort: a lost nudge
    costs a waiting gateway at most a second."""
    client = _redis()
    if client is None:
        return
    try:
        client.publish(CHANNEL, str(version))
    except Exception as exc:  # Redis down: the waiting pulls re-check the database
        log.debug("could not announce catalog version %s: %s", version, exc)
    finally:
        client.close()


def _newest() -> int:
    return CatalogVersion.objects.order_by("-version").values_list("version", flat=True).first() or 0


def wait_for_version_after(after: int, seconds: float) -> None:
    """Return once a version > ``after`` exists, or after ``seconds``."""
    deadline = time.monotonic() + seconds
    client = _redis()
    pubsub = None
    if client is not None:
        try:
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            pubsub.subscribe(CHANNEL)
        except Exception:
            pubsub = None
    try:
        while True:
            if _newest() > after:
                return
            if not connection.in_atomic_block:  # inside a test's transaction, keep it
                connection.close()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            pause = min(RECHECK_SECONDS, remaining)
            if pubsub is not None:
                try:
                    pubsub.get_message(timeout=pause)
                    continue
                except Exception:
                    pubsub = None
            time.sleep(pause)
    finally:
        if pubsub is not None:
            try:
                pubsub.close()
            except Exception:
                pass
        if client is not None:
            client.close()
