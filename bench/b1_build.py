"""B1: build() of 1k, 10k and 50k models (QUALITY.md).

Targets: <= 40 us per model at 10k; t(50k) / t(10k) <= 6 (a linear build).
The models are the synthetic catalog of bench/common.py: aliases, fallback
chains, canaries, adapters, profiles, eval gates, owners, classes.
``document_us_per_model`` times Catalog.document() (canonical JSON and
its digest) on a freshly built catalog, since the catalog caches it.

``*_gc_off`` figures time the same build with Python's cyclic garbage
collector paused: a build allocates a few containers per model, and every
full collection it triggers walks the whole heap, input included. The
difference is what the collector costs, which grows faster than n.
"""

from __future__ import annotations

import gc
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
    runs_for,
    timed,
)
from catalog.builder import build  # noqa: E402

SIZES = (1_000, 10_000, 50_000)


def measure(n: int) -> tuple[float, float, float, int]:
    """Median seconds of build, document() and build with the collector
    paused, and the number of runs, for n models."""
    models = generate_models(n)
    runs = runs_for(n, small=7, large=5)
    builds, documents, gc_off = [], [], []
    for _ in range(runs):
        # The builder's memo keeps every documented model alive beside its
        # canonical bytes: without this, run k would carry the models of
        # runs 1..k-1 in its heap, and the collector would walk them.
        forget_builder_memo()
        seconds, catalog = timed(lambda: build(models, engines=ENGINES, defaults=DEFAULTS))
        assert len(catalog) == n, f"built {len(catalog)} of {n} models"
        builds.append(seconds)
        seconds, _ = timed(catalog.document)
        documents.append(seconds)
        del catalog
    for _ in range(max(3, runs // 2)):
        forget_builder_memo()
        gc.disable()
        try:
            seconds, catalog = timed(lambda: build(models, engines=ENGINES, defaults=DEFAULTS))
        finally:
            gc.enable()
        gc_off.append(seconds)
        del catalog
    return median(builds), median(documents), median(gc_off), runs


def main() -> int:
    build_s: dict[int, float] = {}
    gc_off_s: dict[int, float] = {}
    for n in SIZES:
        progress(f"B1: building {n} models...")
        seconds, document_s, gc_off, runs = measure(n)
        build_s[n], gc_off_s[n] = seconds, gc_off
        progress(f"B1: {n} models, median of {runs}: build {seconds * 1e3:.1f} ms, "
                 f"document {document_s * 1e3:.1f} ms; build with the collector paused {gc_off * 1e3:.1f} ms")
        emit("B1", "build_us_per_model", n, seconds / n * 1e6)
        emit("B1", "document_us_per_model", n, document_s / n * 1e6)
        emit("B1", "build_us_per_model_gc_off", n, gc_off / n * 1e6)
        emit("B1", "runs", n, runs)
    emit("B1", "linearity_ratio_50k_10k", 50_000, build_s[50_000] / build_s[10_000])
    emit("B1", "linearity_ratio_50k_10k_gc_off", 50_000, gc_off_s[50_000] / gc_off_s[10_000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
