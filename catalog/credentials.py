"""Recently checked API credentials, remembered for a few seconds.

A gateway polling the catalog sends the same token many times a second;
looking it up (and its user's role) on every request would cost more than
answering the poll. A token that is revoked, a gateway that is changed or
a role that is changed stops working at once in the process that made the
change and within CACHE_SECONDS everywhere else.
"""

from __future__ import annotations

import threading
import time

CACHE_SECONDS = 10.0
LIMIT = 10_000

_lock = threading.Lock()
_recent: dict[str, tuple[float, tuple]] = {}


def recall(fingerprint: str) -> tuple | None:
    hit = _recent.get(fingerprint)
    if hit is not None and hit[0] > time.monotonic():
        return hit[1]
    return None


def remember(fingerprint: str, result: tuple) -> None:
    with _lock:
        if len(_recent) >= LIMIT:
            _recent.clear()
        _recent[fingerprint] = (time.monotonic() + CACHE_SECONDS, result)


def forget_all() -> None:
    """After any change to who may do what."""
    with _lock:
        _recent.clear()
