"""Building a whole catalog: one namespace, references that resolve, no cycles.

Every step is a pass over the models or over the reference graph, so a
build is linear in the number of models: a catalog of fifty thousand models
must not take a thousand times as long as one of fifty.
"""

from __future__ import annotations

import gc
import hashlib
import json
from contextlib import contextmanager
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from . import memo
from .errors import CatalogError, Problem
from .schema import effective_class, normalize


class Document(NamedTuple):
    """The canonical bytes of a catalog's models, and their digest."""

    body: bytes
    digest: str


class Skipped(NamedTuple):
    """A model left out of the catalog when it was loaded, and why."""

    name: str
    kind: str
    reason: str


def canonical_json(value: object) -> bytes:
    """Sorted keys, no whitespace, UTF-8: equal values give equal bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def digest_of(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


class Catalog:
    """A built catalog: every model resolved, defaults applied.

    The model dicts are shared, not copied, so that reading a catalog of
    ten thousand models costs nothing; callers must not mutate them. What
    only a page about one model needs (who uses it) is worked out when
    asked, not for every model at every build.
    """

    def __init__(self, analysis: _Analysis, skipped: Sequence[Skipped] = ()):
        self._analysis = analysis
        models = [m for i, m in enumerate(analysis.models) if self._has(i)]
        self._models = sorted(models, key=lambda m: m["name"])
        self.notices = [message for _, message in analysis.notices]
        self.skipped = list(skipped)
        self._document: Document | None = None

    def _has(self, position: int | None) -> bool:
        """Whether the model at this input position is in the catalog: every
        one is, but the peers' models a local name took."""
        return position is not None and position not in self._analysis.dropped

    def __len__(self) -> int:
        return len(self._models)

    def resolve(self, name_or_alias: str) -> dict | None:
        position = self._analysis.index.get(name_or_alias)
        return self._analysis.models[position] if self._has(position) else None

    def models(self) -> list[dict]:
        """Every model, sorted by name."""
        return list(self._models)

    def warnings(self, name: str) -> list[str]:
        """What is allowed but worth an operator's attention, for one model."""
        return self._analysis.warnings.get(name, []) if self.resolve(name) is not None else []

    def used_by(self, name: str) -> dict[str, list[str]]:
        """Which models fall back to ``name`` or send it canary traffic."""
        usage: dict[str, list[str]] = {"fallback_of": [], "canary_of": []}
        position = self._analysis.index.get(name)
        if not self._has(position) or self._analysis.models[position]["name"] != name:
            return usage
        for referrer, how in self._analysis.referrers.get(position, ()):
            if self._has(referrer):
                usage[f"{how}_of"].append(self._analysis.models[referrer]["name"])
        return {key: sorted(names) for key, names in usage.items()}

    def sources(self) -> dict[str, list[str]]:
        """Weights source -> names of the models that load it, adapters included.

        So a page listing files can say which are in use, and by what.
        """
        out: dict[str, list[str]] = {}
        for m in self._models:
            if m.get("source"):
                out.setdefault(m["source"], []).append(m["name"])
            for adapter in m.get("adapters", ()):
                names = out.setdefault(adapter["source"], [])
                if not names or names[-1] != m["name"]:
                    names.append(m["name"])
        return dict(sorted(out.items()))

    def effective_class(self, name: str) -> str | None:
        model = self.resolve(name)
        return effective_class(model) if model else None

    def document(self) -> Document:
        # Byte for byte what canonical_json(self.models()) gives, assembled
        # from each model's own canonical bytes, which unchanged models
        # keep from one build to the next.
        if self._document is None:
            body = b"[" + b",".join(memo.canonical(m, canonical_json) for m in self._models) + b"]"
            self._document = Document(body, digest_of(body))
        return self._document

    @property
    def digest(self) -> str:
        return self.document().digest


class _Analysis(NamedTuple):
    models: list[dict | None]  # normalised, by input position; None when not an object
    problems: list[tuple[int, Problem]]
    warnings: dict[str, list[str]]
    notices: list[tuple[int, str]]  # (position, why that peer's model is not offered)
    dropped: set[int]  # federated models not offered: a local name took theirs
    index: dict[str, int]  # name or alias -> input position
    referrers: dict[int, list[tuple[int, str]]]  # target -> (referrer, "fallback"|"canary")
    collisions: dict[int, list[tuple[Problem, int]]]  # model -> (its clash, the model holding that name)


def _context(engines: frozenset, defaults: dict) -> tuple:
    return tuple(sorted(engines)), canonical_json(defaults)


def _analyse(raw_models: Sequence[object], engines: Iterable[str], defaults: dict | None) -> _Analysis:
    engines = frozenset(engines)
    defaults = defaults or {}
    context = _context(engines, defaults)
    models: list[dict | None] = []
    problems: list[tuple[int, Problem]] = []
    warnings: dict[str, list[str]] = {}
    for i, raw in enumerate(raw_models):
        if isinstance(raw, str):
            hit = memo.get(context, raw)
            if hit is not None:
                model, model_warnings = hit
                models.append(model)
                if model_warnings:
                    warnings[model["name"]] = model_warnings
                continue
            text, raw = raw, _decode(raw)
        else:
            text = None
        model, check = normalize(raw, engines=engines, defaults=defaults, label=f"#{i}")
        models.append(model)
        problems.extend((i, Problem(check.model, path, msg)) for path, msg in check.problems)
        if model and check.warnings:
            warnings[model["name"]] = check.warnings
        if text is not None and model is not None and not check.problems:
            memo.put(context, text, model, check.warnings)

    collisions: dict[int, list[tuple[Problem, int]]] = {}
    index, notices, dropped = _namespace(models, problems, collisions)
    referrers = _references(models, index, dropped, problems)
    _cycles(models, index, dropped, problems)
    _encodable(models, problems, context)
    return _Analysis(models, problems, warnings, notices, dropped, index, referrers, collisions)


def _encodable(models: list[dict | None], problems: list, context: tuple) -> None:
    """Every model must have a canonical form the database can store: a
    lone surrogate (from a JSON escape) has none, and PostgreSQL refuses a
    NUL. Encoding now also fills the memo the document reads."""
    # A model with problems is refused anyway, and may still hold the
    # values that caused them (a YAML date, a mapping with number keys).
    refused = {i for i, _ in problems}
    for i, m in enumerate(models):
        if m is None or i in refused:
            continue
        try:
            body = memo.canonical(m, canonical_json)
            if NUL not in body:
                continue
        except (UnicodeEncodeError, TypeError, ValueError):
            pass
        for key, value in m.items():
            if unstorable(value):
                problems.append((i, Problem(m["name"] or f"#{i}", key, f"{key} holds characters that cannot be stored "
                                                                       "(a NUL or a lone surrogate)")))


# What JSON makes of a NUL character: valid JSON, but PostgreSQL cannot
# store it in text or jsonb, so such a model could never be kept.
NUL = b"\\u0000"


def unstorable(value: object) -> bool:
    """Whether a value has no canonical form the database can store: a lone
    surrogate (not valid Unicode) or a NUL character."""
    try:
        return NUL in canonical_json(value)
    except (UnicodeEncodeError, TypeError, ValueError):
        return True


def _decode(text: str) -> object:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text  # normalize() says it is not an object


def _names_of(model: dict) -> list[str]:
    return [n for n in (model["name"], *model["aliases"]) if n]


def _namespace(models: list[dict | None], problems: list,
               collisions: dict[int, list[tuple[Problem, int]]]) -> tuple[dict[str, int], list, set[int]]:
    """One namespace for names and aliases; the earlier local model keeps a name.

    Local models (declared, then runtime, in the order given) claim names
    first. A peer's model whose name or alias is already taken is not
    offered: a request for a model this cluster runs must never leave the
    cluster because a peer started offering the same name.
    """
    index: dict[str, int] = {}
    notices: list[tuple[int, str]] = []
    dropped: set[int] = set()
    for i, m in enumerate(models):
        if m is None or "peer" in m:
            continue
        for j, n in enumerate(_names_of(m)):
            if n in index:
                other = models[index[n]]["name"]
                path = "name" if n == m["name"] else f"aliases.{m['aliases'].index(n)}"
                what = "name" if j == 0 else "alias"
                clash = Problem(m["name"], path, f"{what} {n!r} is already used by model {other!r}")
                problems.append((i, clash))
                collisions.setdefault(i, []).append((clash, index[n]))
            else:
                index[n] = i
    for i, m in enumerate(models):
        if m is None or "peer" not in m:
            continue
        taken = [n for n in _names_of(m) if n in index]
        if taken:
            dropped.add(i)
            owner = models[index[taken[0]]]
            kind = "a model of this cluster" if "peer" not in owner else f"a model of peer {owner['peer']!r}"
            notices.append((i, f"federated model {m['name']!r} is not offered: {taken[0]!r} is already {kind}"))
            continue
        for n in _names_of(m):
            index[n] = i
    return index, notices, dropped


def _references(models, index, dropped, problems) -> dict[int, list[tuple[int, str]]]:
    """Fallbacks and canaries must name a model of this catalog, never their own."""
    referrers: dict[int, list[tuple[int, str]]] = {}
    for i, m in enumerate(models):
        if m is None or "peer" in m:
            continue
        seen: set[int] = set()
        for j, ref in enumerate(m["fallbacks"]):
            if not isinstance(ref, str) or not ref:
                continue
            target = index.get(ref)
            if target is None:
                problems.append((i, Problem(m["name"], f"fallbacks.{j}", f"fallback {ref!r} is not a model of the catalog")))
            elif target == i:
                problems.append((i, Problem(m["name"], f"fallbacks.{j}", "a model cannot fall back to itself")))
            elif target in seen:
                problems.append((i, Problem(m["name"], f"fallbacks.{j}", f"fallback {ref!r} is listed twice")))
            else:
                seen.add(target)
                referrers.setdefault(target, []).append((i, "fallback"))
        canary = m["canary"]
        if canary and isinstance(canary.get("model"), str) and canary["model"]:
            target = index.get(canary["model"])
            if target is None:
                problems.append((i, Problem(m["name"], "canary.model", f"canary {canary['model']!r} is not a model of the catalog")))
            elif target == i:
                problems.append((i, Problem(m["name"], "canary.model", "a model cannot be its own canary")))
            else:
                referrers.setdefault(target, []).append((i, "canary"))
    return referrers


def _cycles(models, index, dropped, problems) -> None:
    """Fallback chains must end: a cycle would bounce a request between
    models that are all out of capacity until it times out.

    Tarjan's strongly connected components, iteratively, so a chain of ten
    thousand fallbacks neither recurses nor revisits a model.
    """
    edges: dict[int, list[int]] = {}
    for i, m in enumerate(models):
        if m is None or "peer" in m:
            continue
        targets = [index[f] for f in m["fallbacks"] if isinstance(f, str) and f in index and index[f] != i]
        if targets:
            edges[i] = targets
    order: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    counter = 0
    for root in edges:
        if root in order:
            continue
        work = [(root, 0)]
        while work:
            node, pos = work.pop()
            if pos == 0:
                order[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            targets = edges.get(node, ())
            if pos < len(targets):
                work.append((node, pos + 1))
                nxt = targets[pos]
                if nxt not in order:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], order[nxt])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == order[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    _report_cycle(models, index, set(component), edges, problems)


def _report_cycle(models, index, component: set[int], edges, problems) -> None:
    # One cycle through the component, named on each of its models: walking
    # it once per member would make a long cycle quadratic.
    node = min(component)
    path = [node]
    seen = {node: 0}
    while True:
        node = next(t for t in edges[node] if t in component)
        if node in seen:
            path = path[seen[node]:] + [node]
            break
        seen[node] = len(path)
        path.append(node)
    names = [models[n]["name"] for n in path]
    chain = " -> ".join(names if len(names) <= 8 else [*names[:4], "...", *names[-3:]])
    for member in sorted(component):
        m = models[member]
        at = next(j for j, f in enumerate(m["fallbacks"]) if isinstance(f, str) and index.get(f) in component)
        problems.append((member, Problem(m["name"], f"fallbacks.{at}", f"fallbacks form a cycle: {chain}")))


@contextmanager
def _collector_paused():
    """A build allocates a few objects per model and frees none of them, which
    is what makes Python's cyclic collector run its full, slowest passes
    again and again: at fifty thousand models a fifth of the time. Paused
    for the build, it collects once after, if it was on."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def build(models: Sequence[object], *, engines: Iterable[str], defaults: dict | None = None) -> Catalog:
    """The catalog these models make, or CatalogError with every problem.

    Models are given in order of authority: declared, then federated (they
    carry ``peer``), then runtime. The earlier local model keeps a name.
    A model may be given as its JSON text, as the store keeps it: unchanged
    text is not decoded and checked again (see ``memo``).
    """
    with _collector_paused():
        analysis = _analyse(models, engines, defaults)
    if analysis.problems:
        raise CatalogError([p for _, p in analysis.problems])
    return Catalog(analysis)
