"""B3: write latency of POST /api/v1/models on PostgreSQL (QUALITY.md).

Targets: p50 <= 30 ms with 100 runtime models in force; p50 at 10k <= 3 x
p50 at 100.

Each POST goes through django.test.Client, in this process: the whole
middleware stack, DRF, bearer-token authentication and the services, on a
dedicated database (llmgw_bench, dropped and created again at every run so
runs are comparable). Skipped, with one line on stderr and no figures,
when PostgreSQL does not answer.

``--profile PATH`` also profiles ten more POSTs at the smallest and the
largest size, after the timed ones: the time spent in the collector and
in each SQL statement, and cProfile's top 25 functions, written to PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    added_model,
    emit,
    median,
    model_name,
    percentile,
    progress,
    seed_runtime_models,
    write_settings_file,
)

SIZES = (100, 1_000, 10_000)
WARMUP = 3
POSTS = 30
PROFILED_POSTS = 10
SERVER = "postgres://postgres@127.0.0.1:5432"
BENCH_DB = "llmgw_bench"


def postgres_answers() -> bool:
    import psycopg

    try:
        with psycopg.connect(f"{SERVER}/postgres", connect_timeout=2):
            return True
    except psycopg.Error:
        return False


def recreate_database() -> None:
    import psycopg

    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")


def setup_django(directory: str) -> None:
    # Before django.setup(): settings.py reads these once.
    os.environ["DATABASE_URL"] = f"{SERVER}/{BENCH_DB}"
    os.environ["LLMGW_SETTINGS_FILE"] = write_settings_file(directory)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "llmgw_console.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def new_model(n: int, k: int, rng: random.Random) -> dict:
    model = added_model("new", n, k, [model_name(rng.randrange(n)), model_name(rng.randrange(n))])
    return {**model, "eval": {"suite": "mmlu-lite", "min_score": 0.6}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", metavar="PATH", help="profile POSTs at the largest size into PATH")
    args = parser.parse_args()

    if not postgres_answers():
        progress(f"B3 skipped: PostgreSQL does not answer at {SERVER}")
        return 0
    recreate_database()
    with tempfile.TemporaryDirectory(prefix="llmgw-bench-") as directory:
        setup_django(directory)
        return run(args.profile)


def run(profile_path: str | None) -> int:
    from django.test import Client

    from catalog import selectors
    from catalog.services import users

    users.add_user(username="bench-operator", role="operator", password=None, by="bench")
    key = users.create_token(username="bench-operator", name="bench", by="bench")
    selectors.settings_in_force()  # imports the settings file as version 1
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    rng = random.Random(3)

    def post(n: int, k: int) -> float:
        body = json.dumps(new_model(n, k, rng))
        start = time.perf_counter()
        response = client.post("/api/v1/models", data=body, content_type="application/json")
        seconds = time.perf_counter() - start
        if response.status_code != 201:
            raise SystemExit(f"B3: POST answered {response.status_code}: {response.content[:500]!r}")
        return seconds

    p50: dict[int, float] = {}
    for n in SIZES:
        progress(f"B3: seeding {n} runtime models...")
        seed_runtime_models(n)
        for k in range(WARMUP):
            post(n, k)
        times = [post(n, WARMUP + k) * 1e3 for k in range(POSTS)]
        p50[n] = median(times)
        progress(f"B3: {n} models: {POSTS} POSTs, p50 {p50[n]:.1f} ms, p95 {percentile(times, 95):.1f} ms, "
                 f"max {max(times):.1f} ms")
        emit("B3", "post_p50_ms", n, p50[n])
        emit("B3", "post_p95_ms", n, percentile(times, 95))
        if profile_path and n in (SIZES[0], SIZES[-1]):
            profile(post, n, profile_path)
    emit("B3", "p50_ratio_10k_100", SIZES[-1], p50[SIZES[-1]] / p50[SIZES[0]])
    return 0


def profile(post, n: int, path: str) -> None:
    """cProfile of PROFILED_POSTS writes, and the time of their SQL by statement."""
    import cProfile
    import gc
    import io
    import pstats
    import re

    from django.db import connection

    from catalog.models import CatalogVersion

    queries: dict[str, list[float]] = {}

    def timed_query(execute, sql, params, many, context):
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            key = re.sub(r"\s+", " ", sql)[:90]
            queries.setdefault(key, []).append(time.perf_counter() - start)

    # A collection is charged to whatever function allocated last, so the
    # profile alone would blame the builder's loops for the collector.
    collections: dict[int, list[float]] = {}
    started = [0.0]

    def on_gc(phase, info):
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            collections.setdefault(info["generation"], []).append(time.perf_counter() - started[0])

    profiler = cProfile.Profile()
    gc.callbacks.append(on_gc)
    try:
        with connection.execute_wrapper(timed_query):
            profiler.enable()
            wall = time.perf_counter()
            for k in range(PROFILED_POSTS):
                post(n, 900 + k)
            wall = time.perf_counter() - wall
            profiler.disable()
    finally:
        gc.callbacks.remove(on_gc)
    out = io.StringIO()
    document = CatalogVersion.objects.order_by("-version").values_list("document", flat=True).first() or ""
    out.write(f"{'#' * 78}\n{PROFILED_POSTS} POSTs /api/v1/models with {n} runtime models in force: "
              f"{wall * 1e3:.0f} ms under the profiler; catalog document {len(document) / 1e6:.2f} MB; "
              f"{len(gc.get_objects())} objects tracked by the collector\n\n")
    out.write("== garbage collector (total ms, collections) ==\n")
    for generation, times in sorted(collections.items()):
        out.write(f"{sum(times) * 1e3:9.1f} ms {len(times):4d}x  generation {generation}\n")
    out.write("\n")
    out.write("== SQL, by statement (total ms, calls) ==\n")
    for sql, times in sorted(queries.items(), key=lambda item: -sum(item[1])):
        out.write(f"{sum(times) * 1e3:9.1f} ms {len(times):4d}x  {sql}\n")
    for title, order, restriction in (("top 25 by cumulative time", "cumulative", ()),
                                      ("project code, top 25 by cumulative time", "cumulative", ("catalog/",)),
                                      ("top 25 by own time", "tottime", ())):
        out.write(f"\n== {title} ==\n")
        pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(*restriction, 25)
    with open(path, "a" if n != SIZES[0] else "w", encoding="utf-8") as f:
        f.write(out.getvalue() + "\n\n")
    progress(f"B3: profile of {PROFILED_POSTS} POSTs at {n} models written to {path}")


if __name__ == "__main__":
    sys.exit(main())
