"""B6: the console's Models page and GET /api/v1/models with 5k models (QUALITY.md).

Targets: p50 <= 150 ms with 5,000 runtime models in force; SQL queries
per request constant in the number of models.

Both are requested through django.test.Client, in this process, on a
PostgreSQL database of this benchmark's own (dropped and created again at
every run): the Models page at ``/`` as a logged-in viewer (session
cookie; redirects are followed, and the final address is printed on
stderr, so the figure follows the page wherever ``/`` sends it), and the
first page of ``GET /api/v1/models`` with a viewer's API token.

At 1,000 and then 5,000 runtime models (rows bulk-created, then
refresh_catalog, as after a start): the first request of a process that
has cached nothing yet is timed alone (``*_cold_ms``: the selectors' cache
and the builder's memo emptied, so the catalog in force is rebuilt from
the rows; 1k's page also pays for loading its templates), then the queries of one warm request of each are counted with
CaptureQueriesContext (listed on stderr), then each is requested
--requests times (at least 30) for the p50. ``n`` is the number of
runtime models.

``--profile PATH`` writes cProfile's top functions of ten requests of
each at the largest size. Skipped, with one line on stderr and no
figures, when PostgreSQL does not answer.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    PG_SERVER,
    emit,
    forget_builder_memo,
    median,
    percentile,
    postgres_answers,
    progress,
    recreate_database,
    seed_runtime_models,
    setup_django,
    top_functions,
)

SIZES = (1_000, 5_000)
REQUESTS = 30
BENCH_DB = "llmgw_bench_b6"
PAGE = "/"
API = "/api/v1/models"
LABELS = {1_000: "1k", 5_000: "5k"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=REQUESTS, help="timed requests of each (default %(default)s)")
    parser.add_argument("--profile", metavar="PATH", help="profile ten requests of each at the largest size")
    args = parser.parse_args()
    requests = max(args.requests, 30)

    if not postgres_answers():
        progress(f"B6 skipped: PostgreSQL does not answer at {PG_SERVER}")
        return 0
    database_url = recreate_database(BENCH_DB)
    os.environ.pop("CELERY_BROKER_URL", None)
    with tempfile.TemporaryDirectory(prefix="llmgw-bench-b6-") as directory:
        from bench.common import write_settings_file

        setup_django({
            "DATABASE_URL": database_url,
            "LLMGW_SETTINGS_FILE": write_settings_file(directory),
            "DJANGO_SECRET_KEY": "bench-b6-" + secrets.token_urlsafe(32),
            "LLMGW_TASKS_INLINE": "1",  # no background thread in this process
        })
        return run(requests, args.profile)


def run(requests: int, profile_path: str | None) -> int:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from catalog import selectors
    from catalog.services import users

    users.add_user(username="bench-viewer", role="viewer", password="bench " + secrets.token_hex(8), by="bench")
    key = users.create_token(username="bench-viewer", name="bench", by="bench")
    selectors.settings_in_force()
    browser = Client()
    browser.force_login(get_user_model().objects.get(username="bench-viewer"))
    api = Client(HTTP_AUTHORIZATION=f"Bearer {key}")

    def page() -> object:
        response = browser.get(PAGE, follow=True)
        if response.status_code != 200 or response.request["PATH_INFO"].startswith("/login"):
            raise SystemExit(f"B6: GET {PAGE} ended at {response.request['PATH_INFO']} "
                             f"with {response.status_code}: {response.content[:300]!r}")
        return response

    def listing() -> object:
        response = api.get(API)
        if response.status_code != 200:
            raise SystemExit(f"B6: GET {API} answered {response.status_code}: {response.content[:300]!r}")
        return response

    for n in SIZES:
        label = LABELS.get(n, str(n))
        progress(f"B6: seeding {n} runtime models...")
        seed_runtime_models(n)
        for figure, request in (("models_page", page), ("api_models", listing)):
            # As in a console process that has just started: nothing cached.
            selectors.clear_cache()
            forget_builder_memo()
            start = time.perf_counter()
            request()
            cold = (time.perf_counter() - start) * 1e3
            emit("B6", f"{figure}_cold_ms", n, cold)
            progress(f"B6: {n} models: first {figure} request of a fresh process {cold:.0f} ms")
        final = page()
        hops = " -> ".join([PAGE] + [url for url, _ in final.redirect_chain])
        progress(f"B6: {PAGE} is served as {hops} ({len(final.content) / 1024:.0f} KiB of HTML)")
        listing()
        for figure, request in (("models_page", page), ("api_models", listing)):
            count, statements = count_queries(request)
            emit("B6", f"{figure}_queries_{label}", n, count)
            progress(f"B6: {n} models: {figure} runs {count} queries:")
            for sql in statements:
                progress(f"  {sql[:150]}")
        for figure, request in (("models_page", page), ("api_models", listing)):
            times = []
            for _ in range(requests):
                start = time.perf_counter()
                request()
                times.append((time.perf_counter() - start) * 1e3)
            progress(f"B6: {n} models: {figure} p50 {median(times):.1f} ms, p95 {percentile(times, 95):.1f} ms "
                     f"over {requests} requests")
            emit("B6", f"{figure}_p50_ms", n, median(times))
        if profile_path and n == SIZES[-1]:
            profile(n, page, listing, profile_path)
    return 0


def count_queries(request) -> tuple[int, list[str]]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        request()
    return len(captured), [q["sql"] for q in captured.captured_queries]


def profile(n: int, page, listing, path: str) -> None:
    import cProfile

    with open(path, "w", encoding="utf-8") as f:
        for figure, request in (("the Models page", page), ("GET /api/v1/models", listing)):
            profiler = cProfile.Profile()
            wall = time.perf_counter()
            profiler.enable()
            for _ in range(10):
                request()
            profiler.disable()
            wall = time.perf_counter() - wall
            f.write(f"{'#' * 78}\n10 requests of {figure} with {n} runtime models: {wall * 1e3:.0f} ms under "
                    f"the profiler ({wall * 100:.0f} ms each)\n")
            f.write(top_functions(profiler, count=30))
            f.write("\n\n")
    progress(f"B6: profile of ten requests of each written to {path}")


if __name__ == "__main__":
    sys.exit(main())
