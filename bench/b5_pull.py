"""B5: the pull path, GET /api/v1/catalog with a 1k-model catalog (QUALITY.md).

Targets: 304s (``If-None-Match`` hits) >= 1,500 req/s with 2 gunicorn
workers; no database query per 304 beyond one version read.

The console runs as in production: ``gunicorn llmgw_console.wsgi -w 2``
(sync workers) on a PostgreSQL database of this benchmark's own, dropped
and created again at every run, with 1,000 runtime models (and the 50
declared ones) in force. ``wrk`` drives it when installed (it sends the
headers with -H); otherwise a Python client, threads with keep-alive
httpx clients, and the figures' names end in ``_httpx``. Each of four
loads runs for --seconds after a short warm-up: conditional GETs that hit
(304) and plain GETs (200, the whole document), each with a viewer's API
token and with a gateway's token. The figures without a suffix are the
viewer's; ``_gateway`` ones the gateway's.

``queries_per_304`` is measured in this process with
django.test.utils.CaptureQueriesContext over one 304 request after a warm
one (the token's last-use stamp, written at most once a minute, is not
counted); the statements are listed on stderr. The test client skips the
request_started signal, so CONN_HEALTH_CHECKS' ``SELECT 1`` on a reused
connection, which gunicorn does pay, is counted apart
(``health_checks_per_304``). ``db_transactions_per_304`` is the
server's own count during the gunicorn run: pg_stat_database's commits
of this database over the requests wrk made (every autocommitted
statement and every health check is one).

``health_rps`` is the floor on this machine at the time of the run:
``GET /api/v1/health`` (no token, one ``SELECT 1``) through the same
middleware, DRF and gunicorn. ``--profile PATH`` writes cProfile's top
functions of 500 in-process 304s.

Skipped, with one line on stderr and no figures, when PostgreSQL does not
answer.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    PG_SERVER,
    ROOT,
    emit,
    free_port,
    postgres_answers,
    progress,
    recreate_database,
    seed_runtime_models,
    setup_django,
    stop_process_group,
    write_settings_file,
)

MODELS = 1_000
WORKERS = 2
SECONDS = 10
WARMUP_SECONDS = 2
CONNECTIONS = 8
THREADS = 2
BENCH_DB = "llmgw_bench_b5"
PATH = "/api/v1/catalog"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=SECONDS, help="each load's duration (default %(default)s)")
    parser.add_argument("--connections", type=int, default=CONNECTIONS,
                        help="concurrent connections (default %(default)s)")
    parser.add_argument("--python-client", action="store_true", help="use the Python client even if wrk is here")
    parser.add_argument("--profile", metavar="PATH", help="also profile 500 in-process 304s into PATH")
    args = parser.parse_args()

    if not postgres_answers():
        progress(f"B5 skipped: PostgreSQL does not answer at {PG_SERVER}")
        return 0
    database_url = recreate_database(BENCH_DB)
    os.environ.pop("CELERY_BROKER_URL", None)
    with tempfile.TemporaryDirectory(prefix="llmgw-bench-b5-") as directory:
        setup_django({
            "DATABASE_URL": database_url,
            "LLMGW_SETTINGS_FILE": write_settings_file(directory),
            "DJANGO_SECRET_KEY": "bench-b5-" + secrets.token_urlsafe(32),
            # No broker and no background thread: a GET queues nothing, and
            # registering the gateway below tries its one push inline.
            "LLMGW_TASKS_INLINE": "1",
        })
        return run(args, Path(directory))


def run(args, directory: Path) -> int:
    from catalog import selectors
    from catalog.services import users
    from catalog.services.gateways import register_gateway

    users.add_user(username="bench-viewer", role="viewer", password=None, by="bench")
    user_key = users.create_token(username="bench-viewer", name="bench", by="bench")
    selectors.settings_in_force()
    progress(f"B5: seeding {MODELS} runtime models...")
    seed_runtime_models(MODELS)
    gateway_key = "gw-" + secrets.token_urlsafe(24)
    # Nothing listens there: its one delivery fails at once and backs off.
    register_gateway(name="bench-puller", url="http://127.0.0.1:9", token=gateway_key, by="bench")
    version = selectors.latest_catalog_version()
    etag = f'"{version.digest}"'
    body_bytes = len(selectors.catalog_document_bytes(version))
    progress(f"B5: catalog v{version.version}, document {body_bytes / 1024:.0f} KiB")
    emit("B5", "document_kib", MODELS, body_bytes / 1024)

    tokens = {"": user_key, "_gateway": gateway_key}
    for suffix, key in tokens.items():
        count, health = queries_per_304(key, etag, label="viewer token" if not suffix else "gateway token")
        emit("B5", f"queries_per_304{suffix}", MODELS, count)
        emit("B5", f"health_checks_per_304{suffix}", MODELS, health)
    if args.profile:
        profile_304s(user_key, etag, args.profile)

    use_wrk = shutil.which("wrk") is not None and not args.python_client
    tool = "wrk" if use_wrk else "httpx"
    name_suffix = "" if use_wrk else "_httpx"
    port = free_port()
    log_path = directory / "gunicorn.log"
    gunicorn = start_gunicorn(port, log_path)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ready(base, gunicorn, log_path)
        check_answers(base, tokens, etag)
        progress(f"B5: load with {tool}, {args.connections} connections, {args.seconds}s each")
        # The floor on this machine, now: the health check (no token, one
        # SELECT 1) through the same middleware and DRF.
        load = wrk if use_wrk else python_load
        load(base + "/api/v1/health", {}, WARMUP_SECONDS, args.connections)
        requests, seconds, errors = load(base + "/api/v1/health", {}, args.seconds, args.connections)
        progress(f"B5: for comparison, GET /api/v1/health: {requests / seconds:.0f} req/s ({errors} errors)")
        emit("B5", f"health_rps{name_suffix}", MODELS, requests / seconds)
        for suffix, key in tokens.items():
            for status, extra in ((304, {"If-None-Match": etag}), (200, {})):
                headers = {"Authorization": f"Bearer {key}", **extra}
                load(base + PATH, headers, WARMUP_SECONDS, args.connections)
                commits = database_commits()
                requests, seconds, errors = load(base + PATH, headers, args.seconds, args.connections)
                time.sleep(1.2)  # backends report their counters within a second of going idle
                commits = database_commits() - commits
                rps = requests / seconds
                progress(f"B5: {status}s, {'viewer' if not suffix else 'gateway'} token: {rps:.0f} req/s "
                         f"({requests} in {seconds:.1f}s, {errors} errors), "
                         f"{commits / max(requests, 1):.2f} database transactions per request")
                if errors:
                    progress(f"B5: {errors} requests did not answer {status} (or failed)")
                emit("B5", f"pull_{status}_rps{name_suffix}{suffix}", MODELS, rps)
                emit("B5", f"db_transactions_per_{status}{suffix}", MODELS, commits / max(requests, 1))
    finally:
        stop_process_group(gunicorn)
    return 0


# --- in this process ---------------------------------------------------------

def queries_per_304(key: str, etag: str, *, label: str) -> tuple[int, int]:
    from django.db import close_old_connections, connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    warm = client.get(PATH)
    if warm.status_code != 200:
        raise SystemExit(f"B5: GET {PATH} with a {label} answered {warm.status_code}: {warm.content[:300]!r}")
    client.get(PATH, HTTP_IF_NONE_MATCH=etag)
    checks = [0]
    is_usable = connection.is_usable

    def counted():
        checks[0] += 1
        return is_usable()

    connection.is_usable = counted
    try:
        with CaptureQueriesContext(connection) as captured:
            close_old_connections()  # what request_started does in gunicorn, and the test client skips
            response = client.get(PATH, HTTP_IF_NONE_MATCH=etag)
    finally:
        del connection.is_usable
    if response.status_code != 304:
        raise SystemExit(f"B5: a matching If-None-Match with a {label} answered {response.status_code}")
    progress(f"B5: one 304 with a {label}: {len(captured)} queries, plus {checks[0]} connection health check(s):")
    for query in captured.captured_queries:
        progress(f"  {query['time']}s  {query['sql'][:160]}")
    return len(captured), checks[0]


def profile_304s(key: str, etag: str, path: str) -> None:
    import cProfile

    from django.db import close_old_connections
    from django.test import Client

    from bench.common import top_functions

    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    for _ in range(20):
        client.get(PATH, HTTP_IF_NONE_MATCH=etag)
    profiler = cProfile.Profile()
    count = 500
    wall = time.perf_counter()
    profiler.enable()
    for _ in range(count):
        close_old_connections()
        client.get(PATH, HTTP_IF_NONE_MATCH=etag)
    profiler.disable()
    wall = time.perf_counter() - wall
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{count} in-process 304s of GET {PATH} with a viewer token, {MODELS} runtime models: "
                f"{wall * 1e3:.0f} ms under the profiler ({wall / count * 1e3:.2f} ms each)\n")
        f.write(top_functions(profiler, count=35))
    progress(f"B5: {count} in-process 304s: {wall / count * 1e3:.2f} ms each under the profiler; "
             f"profile written to {path}")


def database_commits() -> int:
    import psycopg

    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s", [BENCH_DB]).fetchone()
    return int(row[0]) if row else 0


# --- gunicorn ----------------------------------------------------------------

def start_gunicorn(port: int, log_path: Path) -> subprocess.Popen:
    command = [str(ROOT / ".venv" / "bin" / "gunicorn"), "llmgw_console.wsgi", "-w", str(WORKERS),
               "-b", f"127.0.0.1:{port}", "--error-logfile", "-"]
    with open(log_path, "ab") as log:
        return subprocess.Popen(command, cwd=ROOT, env=dict(os.environ), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)


def wait_ready(base: str, process: subprocess.Popen, log_path: Path, timeout: float = 60) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise SystemExit(f"B5: gunicorn exited with {process.returncode}\n{log_path.read_text(errors='replace')}")
        try:
            if httpx.get(base + "/api/v1/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"B5: gunicorn did not answer within {timeout:g}s")
        time.sleep(0.2)


def check_answers(base: str, tokens: dict[str, str], etag: str) -> None:
    """The loads below count requests, not statuses: check once that each
    gets what it is meant to."""
    import httpx

    for key in tokens.values():
        headers = {"Authorization": f"Bearer {key}"}
        for status, extra in ((304, {"If-None-Match": etag}), (200, {})):
            # Each worker process answers at least once (a cold one builds nothing,
            # but imports and connects on its first request).
            for _ in range(WORKERS * 2):
                response = httpx.get(base + PATH, headers={**headers, **extra}, timeout=10)
                if response.status_code != status:
                    raise SystemExit(f"B5: expected {status}, gunicorn answered {response.status_code}: "
                                     f"{response.text[:300]}")


# --- load generators ---------------------------------------------------------

_WRK_REQUESTS = re.compile(r"(\d+) requests in ([\d.]+)(us|ms|s|m)")
_WRK_ERRORS = re.compile(r"Non-2xx or 3xx responses: (\d+)")
_WRK_SOCKET = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")
_UNIT = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}


def wrk(url: str, headers: dict, seconds: int, connections: int) -> tuple[int, float, int]:
    """(requests, seconds, errors) of one wrk run."""
    command = ["wrk", "-t", str(min(THREADS, connections)), "-c", str(connections), "-d", f"{seconds}s",
               "--timeout", "10s"]
    for name, value in headers.items():
        command += ["-H", f"{name}: {value}"]
    result = subprocess.run(command + [url], capture_output=True, text=True, timeout=seconds + 60)
    match = _WRK_REQUESTS.search(result.stdout)
    if result.returncode != 0 or not match:
        raise SystemExit(f"B5: wrk failed ({result.returncode}): {result.stdout}{result.stderr}")
    errors = int(m.group(1)) if (m := _WRK_ERRORS.search(result.stdout)) else 0
    if m := _WRK_SOCKET.search(result.stdout):
        errors += sum(int(g) for g in m.groups())
    return int(match.group(1)), float(match.group(2)) * _UNIT[match.group(3)], errors


def python_load(url: str, headers: dict, seconds: int, connections: int) -> tuple[int, float, int]:
    """(requests, seconds, errors): ``connections`` threads, each with a
    keep-alive client, for ``seconds``."""
    import httpx

    expected = 304 if "If-None-Match" in headers else 200  # the health check answers 200 too
    counts = [[0, 0] for _ in range(connections)]
    stop = time.perf_counter() + seconds

    def worker(slot: list[int]) -> None:
        with httpx.Client(headers=headers, timeout=10) as client:
            while time.perf_counter() < stop:
                try:
                    ok = client.get(url).status_code == expected
                except httpx.HTTPError:
                    ok = False
                slot[0 if ok else 1] += 1

    start = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(slot,)) for slot in counts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    return sum(c[0] + c[1] for c in counts), elapsed, sum(c[1] for c in counts)


if __name__ == "__main__":
    sys.exit(main())
