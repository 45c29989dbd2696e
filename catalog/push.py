"""The gateway protocol, console side: one PUT of a catalog version.

``PUT {url}/v1/catalog`` with the document, ``Authorization: Bearer``, and
the version and digest in headers. The answer decides what happens next:

- 200/204: acknowledged;
- 409 ``{"version": N}``: the gateway already has N, newer than what was
  sent (a late delivery must never downgrade a gateway);
- 422: the gateway rejected this version; not retried until a newer one;
- anything else, a timeout or no connection: retried with backoff.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import httpx

ACKED, NEWER, REJECTED, FAILED = "acked", "newer", "rejected", "failed"


@dataclass(frozen=True)
class Outcome:
    kind: str
    status: int | None = None
    detail: str = ""
    gateway_version: int | None = None  # what a 409 says the gateway has
    duration_ms: float = 0.0


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(body, dict):
        return str(body.get("detail") or body.get("error") or body)[:300]
    return str(body)[:300]


_client: httpx.Client | None = None
_client_lock = threading.Lock()


def _shared_client() -> httpx.Client:
    """One client per process: it keeps connections to the gateways open
    and builds its TLS context once, which is most of a push's cost.
    Created on first use, so each forked worker process gets its own."""
    global _client
    with _client_lock:
        if _client is None:
            _client = httpx.Client(limits=httpx.Limits(max_connections=100, max_keepalive_connections=100))
        return _client


def push(url: str, token: str, *, version: int, digest: str, body: bytes, timeout: float) -> Outcome:
    started = time.monotonic()
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "X-Llmgw-Catalog-Version": str(version),
        "X-Llmgw-Catalog-Digest": digest,
    }
    try:
        response = _shared_client().put(url.rstrip("/") + "/v1/catalog", content=body, headers=headers,
                                        timeout=timeout)
    except httpx.TimeoutException:
        return Outcome(FAILED, detail=f"no answer within {timeout:g}s", duration_ms=_since(started))
    except httpx.HTTPError as exc:
        return Outcome(FAILED, detail=f"cannot reach the gateway: {exc}", duration_ms=_since(started))
    took = _since(started)
    code = response.status_code
    if code in (200, 204):
        return Outcome(ACKED, code, duration_ms=took)
    if code == 409:
        try:
            newer = response.json().get("version")
        except (ValueError, AttributeError):
            newer = None
        if type(newer) is int and newer >= version:
            return Outcome(NEWER, code, f"the gateway already has version {newer}", newer, took)
        return Outcome(FAILED, code, f"409 without a newer version: {_detail(response)}", duration_ms=took)
    if code == 422:
        return Outcome(REJECTED, code, _detail(response) or "rejected", duration_ms=took)
    if code in (401, 403):
        return Outcome(FAILED, code, f"the gateway refused the token ({code})", duration_ms=took)
    return Outcome(FAILED, code, f"HTTP {code}: {_detail(response)}", duration_ms=took)


def _since(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 1)
