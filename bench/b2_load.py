"""B2: load() of 2k and 10k stored rows of which 2% are invalid (QUALITY.md).

Targets: load <= 3 x build at the same size; at 2k, >= 100 x faster than
the seed's one-build-per-row load, measured side by side in this run.

The rows are the synthetic catalog stored as JSON text, as StoredModel
keeps them, with 2% made invalid (a declared name or alias taken, a
fallback to nothing, a bad field, a definition that does not decode, an
alias another runtime model holds); the valid rows that fall back to or
canary an invalid one are skipped with it (cascades). "build" is build()
of the same catalog with none of them made invalid, timed in this run.

``load_us_per_model`` is a cold load: the builder's memo of stored texts
already checked is emptied before each run, as after a start or a
settings change. ``load_warm_us_per_model`` loads the same rows again with
the memo full, which is what a rebuild with unchanged rows costs.

Sanity checks, which exit non-zero after the figures are printed: every
invalid row is skipped, except one that took the alias of a row that is
skipped itself, which must load; the seed's load and ours skip the same
names and give the same catalog digest; ours gives the same result whatever the
row order. Rows are given in name order, which is the order stored_rows()
reads them and, for this catalog, the order they were added in: the only
order in which the seed's row-by-row check can accept every fallback.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    DEFAULTS,
    ENGINES,
    emit,
    forget_builder_memo,
    generate_models,
    median,
    progress,
    stored_rows_with_invalid,
    timed,
)
from bench.seed_load import seed_load  # noqa: E402
from catalog.builder import build, load  # noqa: E402

SIZES = (2_000, 10_000)
SEED_SIZE = 2_000
ORDER_PROBE = 300  # rows the seed also loads in reverse order, to show its order dependence
SEED = 2


def ours(declared, rows):
    return load(declared, [], rows, engines=ENGINES, defaults=DEFAULTS)


def runtime_skipped(catalog) -> set[str]:
    return {s.name for s in catalog.skipped if s.kind == "runtime"}


def surprises(rows, invalid: dict[str, str], catalog) -> tuple[list[str], list[str]]:
    """(invalid rows that loaded, rows that took a runtime alias and were
    skipped though they should load).

    A row that took another runtime row's alias loads exactly when every
    other holder of that alias was skipped and what it falls back to and
    canaries loaded: that is what checking it against the rows accepted
    before it (the seed) says, whatever the reason the holder was skipped.
    """
    skipped = runtime_skipped(catalog)
    decoded: dict[str, dict] = {}
    holders: dict[str, list[str]] = {}
    for name, text in rows:
        try:
            model = json.loads(text)
        except ValueError:
            continue
        if isinstance(model, dict):
            decoded[name] = model
            for alias in model.get("aliases") or ():
                holders.setdefault(alias, []).append(name)
    loaded, lost = [], []
    for name, kind in invalid.items():
        holder_skipped = kind == "runtime-alias" and all(
            other in skipped for alias in decoded[name]["aliases"] for other in holders[alias] if other != name)
        if name not in skipped:
            if not holder_skipped:
                loaded.append(name)
            continue
        if holder_skipped:
            model = decoded[name]
            targets = [*(model.get("fallbacks") or ()), *([model["canary"]["model"]] if model.get("canary") else [])]
            if all(catalog.resolve(t) is not None for t in targets):
                lost.append(name)
    return sorted(loaded), sorted(lost)


def main() -> int:
    failures: list[str] = []
    for n in SIZES:
        declared, rows, invalid = stored_rows_with_invalid(n, seed=SEED)
        clean = [*declared, *generate_models(n, seed=SEED, declared=declared)]
        runs = 7 if n < 10_000 else 5
        progress(f"B2: {n} rows ({len(invalid)} invalid), {runs} runs of load and build...")
        load_s, warm_s, build_s = [], [], []
        catalog = None
        for _ in range(runs):
            forget_builder_memo()
            seconds, catalog = timed(lambda: ours(declared, rows))
            load_s.append(seconds)
            seconds, _ = timed(lambda: ours(declared, rows))
            warm_s.append(seconds)
            forget_builder_memo()
            seconds, _ = timed(lambda: build(clean, engines=ENGINES, defaults=DEFAULTS))
            build_s.append(seconds)
        ours_s, warm_med, build_med = median(load_s), median(warm_s), median(build_s)
        skipped = runtime_skipped(catalog)
        progress(f"B2: {n} rows: load {ours_s * 1e3:.1f} ms (warm {warm_med * 1e3:.1f} ms), "
                 f"build {build_med * 1e3:.1f} ms; {len(skipped)} skipped ({len(skipped & set(invalid))} "
                 f"of {len(invalid)} invalid, {len(skipped - set(invalid))} by cascade)")
        emit("B2", "load_us_per_model", n, ours_s / n * 1e6)
        emit("B2", "load_over_build", n, ours_s / build_med)
        emit("B2", "load_warm_us_per_model", n, warm_med / n * 1e6)
        emit("B2", "skipped_rows", n, len(skipped))

        loaded, lost = surprises(rows, invalid, catalog)
        if loaded:
            failures.append(f"{n}: invalid rows that loaded: {loaded[:10]}")
        if lost:
            failures.append(f"{n}: rows skipped only for an alias that a skipped row holds: {lost[:10]}")
        shuffled = list(rows)
        random.Random(n).shuffle(shuffled)
        again = ours(declared, shuffled)
        if again.digest != catalog.digest or runtime_skipped(again) != skipped:
            failures.append(f"{n}: our load depends on row order")

        if n == SEED_SIZE:
            forget_builder_memo()  # the seed's builds take dicts and use none of it anyway
            progress(f"B2: the seed's load of {n} rows, one build per row (about a minute)...")
            seed_s, (seed_catalog, seed_skipped) = timed(
                lambda: seed_load(declared, [], rows, engines=ENGINES, defaults=DEFAULTS))
            progress(f"B2: seed {seed_s:.1f} s, ours {ours_s * 1e3:.1f} ms")
            emit("B2", "seed_over_ours", n, seed_s / ours_s)
            seed_set = set(seed_skipped)
            if seed_set != skipped:
                failures.append(f"{n}: the seed and ours skip different rows: only the seed "
                                f"{sorted(seed_set - skipped)[:10]}, only ours {sorted(skipped - seed_set)[:10]}")
            elif seed_catalog.digest != catalog.digest:
                failures.append(f"{n}: the seed and ours skip the same rows but build different catalogs")
            else:
                progress(f"B2: the seed and ours skip the same {len(skipped)} rows and agree on the digest")

            probe = rows[:ORDER_PROBE]
            _, forward = seed_load(declared, [], probe, engines=ENGINES, defaults=DEFAULTS)
            _, backward = seed_load(declared, [], probe[::-1], engines=ENGINES, defaults=DEFAULTS)
            mine = runtime_skipped(ours(declared, probe[::-1]))
            progress(f"B2: order dependence, first {ORDER_PROBE} rows: the seed skips {len(forward)} in name "
                     f"order and {len(backward)} in reverse order; ours skips {len(mine)} either way")

    for failure in failures:
        progress(f"B2 SANITY FAILURE: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
