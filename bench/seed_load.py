"""The seed's ``load()``, ported line for line, for comparison ONLY.

This is bench code, not product code: it exists so B2 can measure what
the port gained over the Go service (/work/shared/seed/modelsvc.go.txt),
side by side in one run. The seed checks each stored row by building the
whole catalog with it added to the rows accepted before it: one full build
per row, quadratic in the number of rows, and order-dependent (a row whose
fallback comes later in the store's order is skipped).

Differences from the Go that are the language's, not the algorithm's:
``json.Unmarshal`` into a struct also refuses JSON that is not an object,
which the port does with an ``isinstance`` check; Go ignores unknown
fields where our ``build`` refuses them, which only makes more rows fail
here, in the same single build per row.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog.builder import Catalog, CatalogError, build  # noqa: E402


def _stored_models(rows):
    """storedModels(): decode each row, skipping any that no longer parse."""
    out, undecodable = [], []
    for name, text in rows:
        try:
            model = json.loads(text)
        except ValueError:
            undecodable.append(name)
            continue
        if not isinstance(model, dict):
            undecodable.append(name)
            continue
        out.append((name, model))
    return out, undecodable


def _base(declared, federated, stored):
    """base(): declared, then the federated models no local name took."""
    nxt = list(declared)
    if not federated:
        return nxt
    taken = set()
    for models in (declared, [m for _, m in stored]):
        for m in models:
            taken.add(m.get("name"))
            taken.update(m.get("aliases") or ())
    for f in federated:
        if f.get("name") in taken:
            continue
        nxt.append(f)
    return nxt


def seed_load(declared, federated, rows, *, engines, defaults) -> tuple[Catalog, list[str]]:
    """load(): (the catalog, names of the rows skipped), in row order."""
    stored, skipped = _stored_models(rows)
    nxt = _base(declared, federated, stored)
    for name, model in stored:
        # Checked one at a time and against what is already accepted.
        candidate = [*nxt, model]
        try:
            build(candidate, engines=engines, defaults=defaults)
        except CatalogError:
            skipped.append(name)
            continue
        nxt.append(model)
    return build(nxt, engines=engines, defaults=defaults), skipped
