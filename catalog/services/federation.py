"""Fetching what peer clusters offer, and putting it in the catalog.

A peer that cannot be reached keeps its last offer (marked stale) rather
than taking its models out of the catalog: a short network problem must
not make every runtime model that falls back to a peer's vanish. A peer
that answers garbage is treated like one that cannot be reached.
"""

from __future__ import annotations

import logging

import httpx
from django.conf import settings
from django.utils import timezone

from .. import builder
from ..models import PeerOffer
from ..selectors import federation_interval, peers_of, settings_in_force
from .catalog import refresh_catalog

log = logging.getLogger("llmgw.federation")

MAX_OFFER_BYTES = 16 * 1024 * 1024


def _parse(response: httpx.Response) -> tuple[list, str]:
    """The offered models and their digest; ValueError for anything else."""
    if len(response.content) > MAX_OFFER_BYTES:
        raise ValueError("the offer is larger than 16 MiB")
    try:
        body = response.json()
    except RecursionError:
        raise ValueError("the offer is nested too deeply to read") from None
    if not isinstance(body, dict) or not isinstance(body.get("models"), list):
        raise ValueError("the offer is not {\"models\": [...]}")
    if builder.unstorable(body["models"]):
        raise ValueError("the offer holds characters that cannot be stored (a NUL or a lone surrogate)")
    return body["models"], builder.digest_of(builder.canonical_json(body["models"]))


def fetch_peer(peer: dict) -> bool:
    """Fetch one peer's offer; True when what it offers changed."""
    name = peer["name"]
    row, _ = PeerOffer.objects.get_or_create(peer=name)
    now = timezone.now()
    headers = {"Authorization": f"Bearer {peer.get('token', '')}"}
    if row.etag and row.fetched_at:
        headers["If-None-Match"] = row.etag
    try:
        response = httpx.get(peer["url"].rstrip("/") + "/api/v1/federation/offer", headers=headers,
                             timeout=settings.LLMGW_PUSH_TIMEOUT_SECONDS)
        if response.status_code == 304:
            PeerOffer.objects.filter(pk=row.pk).update(fetched_at=now, checked_at=now, last_error="", updated_at=now)
            return False
        if response.status_code != 200:
            raise ValueError(f"HTTP {response.status_code}")
        offered, digest = _parse(response)
    except (httpx.HTTPError, ValueError) as exc:
        log.warning("peer %s: offer not fetched, keeping the last one: %s", name, exc)
        PeerOffer.objects.filter(pk=row.pk).update(checked_at=now, last_error=str(exc)[:2000], updated_at=now)
        return False
    changed = digest != row.digest
    # update() skips auto_now; updated_at is what tells every process's
    # cached catalog that the offers changed.
    PeerOffer.objects.filter(pk=row.pk).update(offered=offered, digest=digest, etag=response.headers.get("ETag", ""),
                                               fetched_at=now, checked_at=now, last_error="", updated_at=now)
    return changed


def fetch_all_peers(*, force: bool = False) -> int:
    """Fetch every peer of the settings in force that is due (every one
    with ``force``); rebuild the catalog when an offer changed or a peer
    left. Returns the number of peers."""
    document = settings_in_force().document
    peers = peers_of(document)
    names = [p.get("name") for p in peers]
    gone, _ = PeerOffer.objects.exclude(peer__in=names).delete()
    changed = bool(gone)
    interval = federation_interval(document)
    checked = dict(PeerOffer.objects.values_list("peer", "checked_at"))
    now = timezone.now()
    for peer in peers:
        last = checked.get(peer.get("name"))
        if not force and last is not None and (now - last).total_seconds() < interval:
            continue  # federation.interval_seconds: not yet due
        changed |= fetch_peer(peer)
    if changed:
        refresh_catalog(reason="peer offers changed", by="federation")
    return len(peers)
