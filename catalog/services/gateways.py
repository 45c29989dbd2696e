"""Gateways: the registry, and delivering the newest catalog to each.

The database is the outbox: a delivery reads the newest CatalogVersion
when it runs, never the version it was queued for, so a queue that lost,
duplicated or reordered its messages still ends with every gateway on the
newest catalog. Deliveries only ever move a gateway forward.
"""

from __future__ import annotations

import logging
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import timedelta

from celery.utils.time import get_exponential_backoff_interval
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone

from .. import credentials, push, secrets
from ..builder import CatalogError, Problem
from ..builder.rules import HTTP_URL
from ..models import Gateway
from ..selectors import catalog_document_bytes, gateway_item, latest_catalog_version
from . import audit
from .errors import Conflict, NotFound

log = logging.getLogger("llmgw.delivery")

_NAME = re.compile(r"[a-z0-9](?:[a-z0-9._-]{0,98}[a-z0-9])?")
# Two keys for PostgreSQL's advisory locks: this class, and the gateway.
_DELIVERY_LOCK_CLASS = 0x6C6C6D67
# A delivery that keeps finding newer versions stops after this many
# pushes and leaves the rest to the next nudge, so one busy gateway cannot
# hold a worker forever.
MAX_PUSHES_PER_DELIVERY = 10


# --- registry -------------------------------------------------------------

def _check(name: object = None, url: object = None, token: object = None, *, partial: bool) -> list[Problem]:
    problems = []
    if not partial or name is not None:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            problems.append(Problem("", "name", "a gateway's name is a-z, 0-9, '.', '_' and '-', up to 100"))
    if not partial or url is not None:
        if not isinstance(url, str) or not HTTP_URL.fullmatch(url) or len(url) > 500:
            problems.append(Problem("", "url", "url is the gateway's base URL, http(s)://HOST[:PORT][/PATH]"))
    if not partial or token is not None:
        if not isinstance(token, str) or len(token) < 16 or len(token) > 500:
            problems.append(Problem("", "token", "token is the secret the gateway accepts, 16 to 500 characters"))
    return problems


def register_gateway(*, name: object, url: object, token: object, enabled: object = True, by: str) -> Gateway:
    problems = _check(name, url, token, partial=False)
    if not isinstance(enabled, bool):
        problems.append(Problem("", "enabled", "enabled is true or false"))
    if problems:
        raise CatalogError(problems)
    with transaction.atomic():
        if Gateway.objects.filter(name=name).exists():
            raise Conflict(f"a gateway named {name!r} is registered already")
        if Gateway.objects.filter(token_hash=secrets.fingerprint(token)).exists():
            raise Conflict("another gateway uses that token; give each gateway its own")
        gateway = Gateway.objects.create(name=name, url=url, enabled=enabled, token_encrypted=secrets.encrypt(token),
                                         token_hash=secrets.fingerprint(token))
        audit.record(actor=by, action="gateway.add", object_type="gateway", object_id=name, before=None,
                     after=_audited(gateway))
    transaction.on_commit(lambda: enqueue_delivery(gateway.pk))
    return gateway


def _audited(gateway: Gateway) -> dict:
    # Never the token, not even encrypted: audit rows are read by people.
    return {"name": gateway.name, "url": gateway.url, "enabled": gateway.enabled}


def update_gateway(*, name: str, changes: object, by: str) -> Gateway:
    if not isinstance(changes, dict):
        raise CatalogError([Problem("", "", "a change must be an object of fields")])
    unknown = [Problem("", k, f"{k!r} cannot be changed (url, token, enabled)") for k in changes
               if k not in ("url", "token", "enabled")]
    problems = unknown + _check(url=changes.get("url"), token=changes.get("token"), partial=True)
    if "enabled" in changes and not isinstance(changes["enabled"], bool):
        problems.append(Problem("", "enabled", "enabled is true or false"))
    if problems:
        raise CatalogError(problems)
    with transaction.atomic():
        gateway = Gateway.objects.select_for_update().filter(name=name).first()
        if gateway is None:
            raise NotFound(f"no gateway {name!r}")
        before = _audited(gateway)
        if "url" in changes and changes["url"] != gateway.url:
            # Another address may be another gateway: what the old one
            # acknowledged says nothing about it. (If it has the catalog,
            # it answers 409 and is acknowledged again at once.)
            gateway.url = changes["url"]
            gateway.acked_version = gateway.rejected_version = None
            gateway.acked_digest = ""
        if "enabled" in changes:
            gateway.enabled = changes["enabled"]
        if "token" in changes:
            fingerprint = secrets.fingerprint(changes["token"])
            if Gateway.objects.filter(token_hash=fingerprint).exclude(pk=gateway.pk).exists():
                raise Conflict("another gateway uses that token; give each gateway its own")
            gateway.token_encrypted, gateway.token_hash = secrets.encrypt(changes["token"]), fingerprint
        # A new address or token may be the fix for what was failing: try now.
        gateway.failures, gateway.next_attempt_at = 0, None
        gateway.save()
        after = _audited(gateway)
        if "token" in changes:
            after["token"] = "changed"
        audit.record(actor=by, action="gateway.update", object_type="gateway", object_id=name, before=before,
                     after=after)
        credentials.forget_all()  # a remembered gateway token may be the old one
    transaction.on_commit(lambda: enqueue_delivery(gateway.pk))
    return gateway


def remove_gateway(*, name: str, by: str) -> None:
    with transaction.atomic():
        gateway = Gateway.objects.filter(name=name).first()
        if gateway is None:
            raise NotFound(f"no gateway {name!r}")
        audit.record(actor=by, action="gateway.remove", object_type="gateway", object_id=name,
                     before=_audited(gateway), after=None)
        gateway.delete()
        credentials.forget_all()


def push_now(*, name: str, by: str) -> dict:
    """Queue a delivery now, whatever the backoff says (the operator asked)."""
    gateway = Gateway.objects.filter(name=name).first()
    if gateway is None:
        raise NotFound(f"no gateway {name!r}")
    if not gateway.enabled:
        raise Conflict(f"gateway {name!r} is disabled; enable it first")
    with transaction.atomic():
        Gateway.objects.filter(pk=gateway.pk).update(next_attempt_at=None)
        audit.record(actor=by, action="gateway.push", object_type="gateway", object_id=name, before=None,
                     after=None)
    transaction.on_commit(lambda: enqueue_delivery(gateway.pk))
    gateway.refresh_from_db()
    return gateway_item(gateway, latest_catalog_version())


# --- delivery -------------------------------------------------------------

_local_locks: dict[int, threading.Lock] = {}
_local_guard = threading.Lock()


@contextmanager
def _delivery_lock(gateway_id: int):
    """One delivery in flight per gateway, across every worker process.

    A PostgreSQL session-level advisory lock: held while the push is on the
    wire without holding a transaction open, released at once if the
    worker dies (its connection closes). Yields False when another
    delivery holds it; that one re-reads the newest version before it
    stops, so nothing is missed by skipping.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [_DELIVERY_LOCK_CLASS, gateway_id])
            held = cursor.fetchone()[0]
        try:
            yield held
        finally:
            if held:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [_DELIVERY_LOCK_CLASS, gateway_id])
        return
    with _local_guard:
        lock = _local_locks.setdefault(gateway_id, threading.Lock())
    held = lock.acquire(blocking=False)
    try:
        yield held
    finally:
        if held:
            lock.release()


def backoff_seconds(failures: int) -> float:
    """Capped exponential backoff with full jitter: many gateways that
    failed together do not all retry in the same second."""
    return get_exponential_backoff_interval(factor=1, retries=max(failures - 1, 0),
                                            maximum=settings.LLMGW_PUSH_BACKOFF_MAX_SECONDS, full_jitter=True) or 1


def deliver(gateway_id: int) -> str:
    """Bring one gateway to the newest catalog version. Idempotent.

    Returns what happened: ``in_sync``, ``busy``, ``disabled``, ``gone``,
    ``rejected``, ``retry`` (failed; the caller schedules the next try)
    or ``acked``.
    """
    with _delivery_lock(gateway_id) as held:
        if not held:
            return "busy"
        outcome = "in_sync"
        for _ in range(MAX_PUSHES_PER_DELIVERY):
            gateway = Gateway.objects.filter(pk=gateway_id).first()
            if gateway is None:
                return "gone"
            if not gateway.enabled:
                return "disabled"
            latest = latest_catalog_version()
            if latest is None or (gateway.acked_version or 0) >= latest.version:
                return outcome
            if gateway.rejected_version == latest.version:
                return "rejected"  # not retried: only a newer version is worth sending
            token = secrets.decrypt(gateway.token_encrypted)
            if token is None:
                _record_failure(gateway, latest.version, "the gateway's token cannot be decrypted "
                                                         "(the encryption key changed): set it again")
                return "retry"
            result = push.push(gateway.url, token, version=latest.version, digest=latest.digest,
                               body=catalog_document_bytes(latest), timeout=settings.LLMGW_PUSH_TIMEOUT_SECONDS)
            log.info("delivery gateway=%s version=%s outcome=%s status=%s duration_ms=%s%s", gateway.name,
                     latest.version, result.kind, result.status, result.duration_ms,
                     f" detail={result.detail!r}" if result.detail else "")
            if result.kind == push.ACKED:
                _record_ack(gateway, latest.version, latest.digest)
                outcome = "acked"
            elif result.kind == push.NEWER and result.gateway_version > latest.version:
                # Newer than anything this console made: its database was
                # restored from a backup, or two consoles feed one gateway.
                # Never downgrade it, never call it in sync silently.
                _record_ack(gateway, latest.version, latest.digest)
                Gateway.objects.filter(pk=gateway.pk).update(last_error=(
                    f"the gateway has version {result.gateway_version}, newer than this console's newest "
                    f"({latest.version}): was the database restored, or does another console feed it?"))
                return "acked"
            elif result.kind == push.NEWER:
                _record_ack(gateway, result.gateway_version, latest.digest if result.gateway_version == latest.version
                            else "")
                outcome = "acked"
            elif result.kind == push.REJECTED:
                _record_rejection(gateway, latest.version, result.detail)
                return "rejected"
            else:
                _record_failure(gateway, latest.version, result.detail)
                return "retry"
        return outcome


def _record_ack(gateway: Gateway, version: int, digest: str) -> None:
    # Only forward, in the one statement: an acknowledgement that arrives
    # after a newer one must not move the gateway back.
    newer = Q(acked_version__isnull=True) | Q(acked_version__lt=version)
    Gateway.objects.filter(pk=gateway.pk).update(
        acked_version=Case(When(newer, then=Value(version)), default=F("acked_version"),
                           output_field=Gateway._meta.get_field("acked_version")),
        acked_digest=Case(When(newer, then=Value(digest)), default=F("acked_digest"),
                          output_field=Gateway._meta.get_field("acked_digest")),
        last_seen=timezone.now(), last_error="", failures=0, next_attempt_at=None)


def _record_rejection(gateway: Gateway, version: int, reason: str) -> None:
    Gateway.objects.filter(pk=gateway.pk).update(
        rejected_version=version, last_error=f"version {version} rejected: {reason}"[:2000],
        last_seen=timezone.now(), failures=0, next_attempt_at=None)


def _record_failure(gateway: Gateway, version: int, reason: str) -> None:
    failures = gateway.failures + 1
    Gateway.objects.filter(pk=gateway.pk).update(
        failures=F("failures") + 1, last_error=f"version {version}: {reason}"[:2000],
        next_attempt_at=timezone.now() + timedelta(seconds=backoff_seconds(failures)))


def gateway_seen(gateway: Gateway) -> None:
    """A pull is a sign of life; recorded at most every few seconds (not
    audited: it is not a change)."""
    now = timezone.now()
    if gateway.last_seen is None or (now - gateway.last_seen).total_seconds() > 5:
        Gateway.objects.filter(pk=gateway.pk).update(last_seen=now)
        gateway.last_seen = now  # the identity is remembered across requests


def due_for_delivery() -> list[int]:
    """Every enabled gateway behind the newest version, whose backoff has
    passed, and whose newest version was not rejected: what the periodic
    reconcile queues, so a lost nudge, a broker outage or a gateway that
    was down converge without anyone acting."""
    latest = latest_catalog_version()
    if latest is None:
        return []
    now = timezone.now()
    return list(
        Gateway.objects.filter(enabled=True)
        .filter(Q(acked_version__isnull=True) | Q(acked_version__lt=latest.version))
        .exclude(rejected_version=latest.version)
        .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
        .values_list("pk", flat=True)
    )


def publish_latest() -> None:
    """After a new catalog version commits: one task that delivers it to
    every enabled gateway. A failure to queue is logged, never raised: the
    edit has committed and the reconcile will deliver it."""
    from .. import tasks

    tasks.enqueue(tasks.deliver_to_gateways, None)


def enqueue_delivery(gateway_id: int) -> None:
    from .. import tasks

    tasks.enqueue(tasks.deliver_catalog, gateway_id)


# Pushes on the wire at once from one worker: a gateway answers in
# milliseconds, so fifty delivered one after another would take seconds.
PARALLEL_PUSHES = 16


def deliver_to_many(gateway_ids: list[int] | None, *, parallel: bool) -> dict[int, str]:
    """Deliver to these gateways (every enabled one when None), several at
    once when ``parallel``; returns each one's outcome."""
    if gateway_ids is None:
        gateway_ids = list(Gateway.objects.filter(enabled=True).values_list("pk", flat=True))
    if not parallel or len(gateway_ids) < 2:
        return {gateway_id: deliver(gateway_id) for gateway_id in gateway_ids}
    with ThreadPoolExecutor(max_workers=min(PARALLEL_PUSHES, len(gateway_ids)),
                            thread_name_prefix="llmgw-push") as pool:
        return dict(zip(gateway_ids, pool.map(_deliver_in_thread, gateway_ids)))


def _deliver_in_thread(gateway_id: int) -> str:
    try:
        return deliver(gateway_id)
    except Exception:  # one gateway's surprise must not stop the others
        log.exception("delivery to gateway %s failed", gateway_id)
        return "retry"
    finally:
        connection.close()  # each thread has its own; do not leak it
