"""Models already normalised, by the JSON text they were stored as.

A write rebuilds the whole catalog, and nearly every model in it is the
same stored text as last time. Decoding and checking ten thousand
unchanged definitions again would make every write cost as much as the
first load; remembering them makes a rebuild cost what its cross-model
checks cost. Only models with no problem are remembered, under the
engines and defaults they were checked against, so a settings change
checks everything again.

The remembered dicts are shared by every catalog built from them: nothing
may mutate a built model (services copy before they change a definition).
"""

from __future__ import annotations

import threading

# Enough for several catalogs of the largest size we plan for; past it the
# memo starts again rather than grow without bound.
LIMIT = 200_000

_lock = threading.Lock()
_models: dict[tuple, tuple[dict, list[str]]] = {}
_canonical: dict[int, tuple[dict, bytes]] = {}


def get(context: tuple, text: str) -> tuple[dict, list[str]] | None:
    return _models.get((context, text))


def put(context: tuple, text: str, model: dict, warnings: list[str]) -> None:
    with _lock:
        if len(_models) >= LIMIT:
            _models.clear()
            _canonical.clear()
        _models[(context, text)] = (model, warnings)


def canonical(model: dict, encode) -> bytes:
    """The canonical bytes of a built model, encoded once per model object.

    Keyed by identity, with the model kept alive beside its bytes so an id
    can never be reused for another dict while its entry exists.
    """
    hit = _canonical.get(id(model))
    if hit is not None and hit[0] is model:
        return hit[1]
    body = encode(model)
    with _lock:
        if len(_canonical) >= LIMIT:
            _canonical.clear()
        _canonical[id(model)] = (model, body)
    return body


def clear() -> None:
    with _lock:
        _models.clear()
        _canonical.clear()
