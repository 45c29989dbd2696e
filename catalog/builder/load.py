"""Loading the catalog in force from stored rows: skip what does not load.

Separate from building because its job is the opposite: a build refuses a
catalog with any problem; a load finds the models to leave out so that the
rest (and always the declared models) stay in force.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from . import memo
from .catalog import Catalog, Skipped, _Analysis, _analyse, _collector_paused, _context
from .errors import CatalogError, Problem


def load(declared: Sequence[object], federated: Sequence[object], stored: Sequence[tuple[str, str]], *,
         engines: Iterable[str], defaults: dict | None = None) -> Catalog:
    """The catalog in force: declared models must build; the rest may be skipped.

    ``stored`` is the runtime rows as (name, JSON text). A row that does not
    decode, takes a declared name, or does not make a valid catalog is
    skipped with its reason, and so is every model that falls back to it or
    sends it canary traffic: refusing to start over one bad row would let a
    model somebody added from a laptop take the cluster down.

    The invalid rows are found by one build, their dependants by walking the
    reference graph backwards; a second build confirms. Never one build per
    row, and the order of the rows does not matter.
    """
    engines = frozenset(engines)
    skipped: list[Skipped] = []
    declared_names = {m["name"] for m in declared if isinstance(m, dict) and isinstance(m.get("name"), str)}
    context = _context(engines, defaults or {})
    runtime: list[object] = []
    runtime_names: list[str] = []
    for name, text in sorted(stored, key=lambda row: str(row[0])):
        hit = memo.get(context, text) if isinstance(text, str) else None
        if hit is not None:
            model = hit[0]  # decoded and checked before; its name and shape are known
        else:
            try:
                model = json.loads(text) if isinstance(text, (str, bytes)) else text
            except (ValueError, RecursionError) as exc:
                skipped.append(Skipped(name, "runtime", f"the stored definition is not JSON: {exc}"))
                continue
        if not isinstance(model, dict):
            skipped.append(Skipped(name, "runtime", "the stored definition is not an object"))
        elif model.get("name") != name:
            skipped.append(Skipped(name, "runtime", f"the stored definition is named {model.get('name')!r}, "
                                                    f"not {name!r}"))
        elif "peer" in model:
            skipped.append(Skipped(name, "runtime", "a stored model cannot be a peer's model"))
        elif name in declared_names:
            skipped.append(Skipped(name, "runtime", f"{name!r} is declared in the cluster settings, which win"))
        else:
            runtime.append(text if isinstance(text, str) else model)
            runtime_names.append(name)

    candidates: list[object] = [*declared, *federated, *runtime]
    kinds = ["declared"] * len(declared) + ["federated"] * len(federated) + ["runtime"] * len(runtime)
    labels = [_label(m, i) for i, m in enumerate([*declared, *federated])] + runtime_names
    fixed = len(declared)
    # Each round drops at least one model, so this ends; in practice the
    # second build is clean.
    while True:
        with _collector_paused():
            analysis = _analyse(candidates, engines, defaults)
        _refuse_declared_on_peers(analysis, kinds, fixed)
        if not analysis.problems:
            # A peer's model a local name took is left out too: list it with
            # the stored rows, so one place says everything not in force.
            skipped += [Skipped(labels[i], kinds[i], message) for i, message in analysis.notices]
            return Catalog(analysis, skipped)
        reasons = _skip_reasons(analysis, fixed, labels)
        if not reasons:
            raise CatalogError([p for _, p in analysis.problems])
        for i in sorted(reasons):
            skipped.append(Skipped(labels[i], kinds[i], "; ".join(reasons[i])))
        candidates = [c for i, c in enumerate(candidates) if i not in reasons]
        kinds = [k for i, k in enumerate(kinds) if i not in reasons]
        labels = [n for i, n in enumerate(labels) if i not in reasons]


def _refuse_declared_on_peers(analysis: _Analysis, kinds: list[str], fixed: int) -> None:
    """A declared model may not fall back to, or canary, a peer's model.

    The settings are reviewed and must always build; a peer can withdraw a
    model at any moment, which would leave the cluster's own settings
    unloadable. Runtime models may: they are skipped when that happens.
    """
    for target, refs in analysis.referrers.items():
        if kinds[target] != "federated":
            continue
        peer_model = analysis.models[target]
        for referrer, how in refs:
            if referrer >= fixed:
                continue
            m = analysis.models[referrer]
            if how == "canary":
                path = "canary.model"
            else:
                path = next((f"fallbacks.{j}" for j, f in enumerate(m["fallbacks"])
                             if isinstance(f, str) and analysis.index.get(f) == target), "fallbacks")
            analysis.problems.append((referrer, Problem(
                m["name"], path, f"{peer_model['name']!r} is a peer's model; a declared model cannot depend on it "
                                 "(the peer may withdraw it at any time)")))


def _skip_reasons(analysis: _Analysis, fixed: int, labels: list[str]) -> dict[int, list[str]]:
    """Which models one round of loading leaves out, and why.

    First the models with problems of their own and everything that falls
    back to them or canaries them; then the models whose only problem is a
    name clash: one is held back for the next round when every model it
    clashed with is already going, since without them it may be fine —
    whether it loads must not depend on whose name sorts first.
    """
    own: dict[int, list[str]] = {}
    clashes: dict[int, list[str]] = {}
    for i, problem in analysis.problems:
        if i < fixed:
            continue
        text = f"{problem.path}: {problem.message}" if problem.path else problem.message
        is_clash = any(problem is clash for clash, _ in analysis.collisions.get(i, ()))
        (clashes if is_clash else own).setdefault(i, []).append(text)
    reasons = dict(own)
    for i, texts in clashes.items():
        if i in reasons:
            reasons[i].extend(texts)
    _propagate(analysis, fixed, labels, reasons)
    clashing = {i: texts for i, texts in clashes.items() if i not in reasons}
    for i, texts in clashing.items():
        if not all(holder in reasons for _, holder in analysis.collisions[i]):
            reasons[i] = texts
    _propagate(analysis, fixed, labels, reasons)
    return reasons


def _propagate(analysis: _Analysis, fixed: int, labels: list[str], reasons: dict[int, list[str]]) -> None:
    """Skip, with a reason, every model that reaches a skipped one through
    a fallback or a canary: walking the reference graph backwards, once."""
    queue = list(reasons)
    while queue:
        target = queue.pop()
        for referrer, how in analysis.referrers.get(target, ()):
            if referrer >= fixed and referrer not in reasons:
                verb = "falls back to" if how == "fallback" else "sends canary traffic to"
                reasons[referrer] = [f"{verb} {labels[target]!r}, which was skipped"]
                queue.append(referrer)


def _label(model: dict | None, position: int) -> str:
    return model["name"] if model and model["name"] else f"#{position}"
