"""B4: propagation, from an API write until all of 50 gateways applied it (QUALITY.md).

Targets: p50 <= 300 ms, p95 <= 1 s over 20 writes.

The real path: PostgreSQL (a database of this benchmark's own, dropped and
created again at every run), Redis (database 14, emptied first; --broker
names another) and ONE Celery worker process (``celery -A llmgw_console
worker -l warning -c 2``, the prefork pool) started here on the same database, settings file and
secret key. 50 reference gateways (catalog/reference_gateway.py) serve
real HTTP on loopback from threads of this process, each registered
through the gateway service as an operator would.

Each write is ``POST /api/v1/models`` through django.test.Client, in this
process, with an operator's token. The clock starts before the POST and
stops when this process sees all 50 gateways at the new version (their
``.version`` polled every 2 ms). Each gateway also stamps the moment it
applied the version, which splits the time into: the write itself (the
POST until it returns), the first gateway (the write's start until the
first gateway applied it: the write, queueing, the worker taking the
task, one push; often before the POST returns, while it still queues the
other deliveries) and the spread (first to last gateway: the 50
deliveries through the worker's processes). Between writes the
benchmark waits until the console has recorded every acknowledgement, so
a write never races the previous one's tail.

Measured at 100 and 1,000 runtime models in force (``n`` is that count):
every delivery sends the whole catalog document, so its size matters.
Note that the gateways share this process (and the machine's two cores)
with the benchmark and the worker: each one parses the document and
checks its digest under this process's GIL, which a real gateway on its
own machine would not charge to the console.

The worker's own log (``delivery ... duration_ms=``, one line per push)
gives the time of each HTTP push, summarised on stderr. ``--profile PATH``
also writes cProfile of five POSTs (how much of a write is queueing the
deliveries) and of 50 deliveries run in this process (cProfile and SQL by
statement: what one delivery costs). Skipped, with one
line on stderr and no figures, when PostgreSQL or Redis does not answer.
"""

from __future__ import annotations

import argparse
import json
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
    REDIS_SERVER,
    ROOT,
    added_model,
    emit,
    flush_redis,
    median,
    model_name,
    percentile,
    postgres_answers,
    progress,
    recreate_database,
    redis_answers,
    seed_runtime_models,
    setup_django,
    stop_process_group,
    write_settings_file,
)
from catalog.reference_gateway import ReferenceGateway  # noqa: E402

SIZES = (100, 1_000)
GATEWAYS = 50
WARMUP = 3
WRITES = 20
POLL_SECONDS = 0.002
CONVERGE_TIMEOUT = 60.0
BENCH_DB = "llmgw_bench_b4"
BROKER = f"{REDIS_SERVER}/14"
WORKER = [str(ROOT / ".venv" / "bin" / "celery"), "-A", "llmgw_console", "worker", "-l", "warning", "-c", "2"]


class StampedGateway(ReferenceGateway):
    """The reference gateway, noting when (perf_counter) it applied each version."""

    def __init__(self, token: str):
        super().__init__(token)
        self.applied_at: dict[int, float] = {}

    def apply(self, body: bytes) -> tuple[int, dict]:
        status, answer = super().apply(body)
        if status == 200:
            self.applied_at[answer["version"]] = time.perf_counter()
        return status, answer


def start_gateways(count: int) -> list[tuple[str, StampedGateway, object]]:
    from catalog.services.gateways import register_gateway

    running = []
    for k in range(count):
        name = f"bench-gw-{k:02d}"
        receiver = StampedGateway(f"tok-{name}-{secrets.token_hex(12)}")
        server = receiver.server("127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
                         name=name).start()
        register_gateway(name=name, url=f"http://127.0.0.1:{server.server_address[1]}", token=receiver.token,
                         by="bench")
        running.append((name, receiver, server))
    return running


def start_worker(log_path: Path, level: str) -> subprocess.Popen:
    command = WORKER + ["-n", f"bench-b4-{os.getpid()}@%h"]
    command[command.index("-l") + 1] = level
    with open(log_path, "ab") as log:
        return subprocess.Popen(command, cwd=ROOT, env=dict(os.environ),
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return ""


def latest_version() -> int:
    from catalog.models import CatalogVersion

    return CatalogVersion.objects.order_by("-version").values_list("version", flat=True).first() or 0


def wait_all_applied(receivers, version: int, *, timeout: float, worker, log_path: Path) -> float:
    """perf_counter when every gateway was first seen at ``version`` or later."""
    deadline = time.perf_counter() + timeout
    while True:
        now = time.perf_counter()
        if all(r.version >= version for r in receivers):
            return now
        if now > deadline or worker.poll() is not None:
            behind = [f"{k}:v{r.version}" for k, r in enumerate(receivers) if r.version < version]
            raise SystemExit(f"B4: version {version} not applied by {len(behind)} gateways within {timeout:g}s "
                             f"({', '.join(behind[:10])}); worker "
                             f"{'exited ' + str(worker.returncode) if worker.poll() is not None else 'running'}\n"
                             f"--- worker log ---\n{tail(log_path)}")
        time.sleep(POLL_SECONDS)


def wait_all_recorded(version: int, *, timeout: float = 30.0) -> None:
    """Until the console recorded every gateway's acknowledgement: the
    worker is then idle, and the next write starts from quiet."""
    from django.db.models import Q

    from catalog.models import Gateway

    deadline = time.monotonic() + timeout
    while Gateway.objects.filter(Q(acked_version__isnull=True) | Q(acked_version__lt=version)).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"B4: the console did not record every acknowledgement of v{version}")
        time.sleep(0.01)


def new_model(n: int, k: int) -> dict:
    return added_model("prop", n, k, [model_name(k % n)])


_PUSH_LINE = re.compile(r"delivery gateway=\S+ version=(\d+) outcome=(\S+) status=\S+ duration_ms=([\d.]+)")


def push_durations(log_path: Path, versions: set[int]) -> list[float]:
    """The worker's own timing of each HTTP push of these versions, in ms."""
    out = []
    for line in log_path.read_text(errors="replace").splitlines():
        match = _PUSH_LINE.search(line)
        if match and int(match.group(1)) in versions:
            out.append(float(match.group(3)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="runtime models in force, comma-separated (default %(default)s)")
    parser.add_argument("--broker", default=BROKER,
                        help="the Redis database the worker and this process use; emptied first (default %(default)s)")
    parser.add_argument("--profile", metavar="PATH",
                        help="also profile 50 deliveries run in this process (cProfile, SQL by statement) into PATH")
    parser.add_argument("--worker-log", metavar="PATH", help="keep the worker's log in PATH")
    parser.add_argument("--worker-level", default="warning", help="the worker's -l (default %(default)s)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]

    if not postgres_answers():
        progress(f"B4 skipped: PostgreSQL does not answer at {PG_SERVER}")
        return 0
    broker = args.broker
    if not redis_answers(broker):
        progress(f"B4 skipped: Redis does not answer at {broker}")
        return 0
    database_url = recreate_database(BENCH_DB)
    flush_redis(broker)
    with tempfile.TemporaryDirectory(prefix="llmgw-bench-b4-") as directory:
        setup_django({
            "DATABASE_URL": database_url,
            "LLMGW_SETTINGS_FILE": write_settings_file(directory),
            # The worker decrypts the gateway tokens this process stored:
            # same secret key (and encryption key, when one is set).
            "DJANGO_SECRET_KEY": "bench-b4-" + secrets.token_urlsafe(32),
            "CELERY_BROKER_URL": broker,
            "LLMGW_TASKS_INLINE": "0",
            "PYTHONUNBUFFERED": "1",
        })
        log_path = Path(directory) / "worker.log"
        worker = None
        servers = []
        try:
            worker = start_worker(log_path, args.worker_level)
            return run(sizes, worker, log_path, servers, args.profile)
        finally:
            stop_process_group(worker)
            if args.worker_log and log_path.exists():
                shutil.copyfile(log_path, args.worker_log)
            for server in servers:
                server.shutdown()
                server.server_close()
            flush_redis(broker)


def run(sizes: list[int], worker, log_path: Path, servers: list, profile_path: str | None) -> int:
    from django.test import Client

    from catalog import selectors
    from catalog.services import users

    users.add_user(username="bench-operator", role="operator", password=None, by="bench")
    key = users.create_token(username="bench-operator", name="bench", by="bench")
    selectors.settings_in_force()  # imports the settings file as version 1
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    receivers: list[StampedGateway] = []

    for n in sizes:
        progress(f"B4: seeding {n} runtime models...")
        seed_runtime_models(n)
        if not receivers:
            progress(f"B4: starting and registering {GATEWAYS} reference gateways; waiting for the worker...")
            running = start_gateways(GATEWAYS)
            servers.extend(server for _, _, server in running)
            receivers = [receiver for _, receiver, _ in running]
        version = latest_version()
        started = time.perf_counter()
        wait_all_applied(receivers, version, timeout=CONVERGE_TIMEOUT, worker=worker, log_path=log_path)
        wait_all_recorded(version)
        progress(f"B4: all {GATEWAYS} gateways at v{version} after {time.perf_counter() - started:.1f}s")

        totals, writes, pickups, spreads, measured = [], [], [], [], set()
        for k in range(WARMUP + WRITES):
            expected = latest_version() + 1
            body = json.dumps(new_model(n, k))
            start = time.perf_counter()
            response = client.post("/api/v1/models", data=body, content_type="application/json")
            written = time.perf_counter()
            if response.status_code != 201:
                raise SystemExit(f"B4: POST answered {response.status_code}: {response.content[:500]!r}")
            seen = wait_all_applied(receivers, expected, timeout=CONVERGE_TIMEOUT, worker=worker,
                                    log_path=log_path)
            if latest_version() != expected:
                raise SystemExit(f"B4: the write made v{latest_version()}, expected v{expected}")
            stamps = [r.applied_at[expected] for r in receivers if expected in r.applied_at]
            wait_all_recorded(expected)
            time.sleep(0.05)
            if k < WARMUP:
                continue
            measured.add(expected)
            totals.append((seen - start) * 1e3)
            writes.append((written - start) * 1e3)
            if len(stamps) == len(receivers):  # a gateway could have skipped to a newer version
                pickups.append((min(stamps) - start) * 1e3)
                spreads.append((max(stamps) - min(stamps)) * 1e3)

        pushes = push_durations(log_path, measured)
        p50, p95 = median(totals), percentile(totals, 95)
        progress(f"B4: {n} models, {WRITES} writes to {GATEWAYS} gateways: all applied p50 {p50:.0f} ms, "
                 f"p95 {p95:.0f} ms, max {max(totals):.0f} ms; of which the POST p50 {median(writes):.0f} ms, "
                 f"first gateway applied p50 {median(pickups):.0f} ms, first to last gateway "
                 f"p50 {median(spreads):.0f} ms")
        if pushes:
            progress(f"B4: {len(pushes)} pushes timed by the worker: p50 {median(pushes):.1f} ms, "
                     f"p95 {percentile(pushes, 95):.1f} ms; {GATEWAYS} pushes over 2 worker processes "
                     f"take >= {median(pushes) * GATEWAYS / 2:.0f} ms of HTTP alone")
        emit("B4", "ack_all_p50_ms", n, p50)
        emit("B4", "ack_all_p95_ms", n, p95)
        emit("B4", "write_p50_ms", n, median(writes))
        emit("B4", "first_gateway_p50_ms", n, median(pickups))
        emit("B4", "first_to_last_ack_p50_ms", n, median(spreads))
        if pushes:
            emit("B4", "push_p50_ms", n, median(pushes))
        if profile_path:
            profile_writes(n, client, receivers, worker, log_path, profile_path, append=n != sizes[0])
            profile_deliveries(n, profile_path)
    return 0


def profile_writes(n: int, client, receivers, worker, log_path: Path, path: str, *, append: bool) -> None:
    """cProfile of five POSTs: how much of a write is queueing the deliveries."""
    import cProfile
    import pstats
    import io

    profiler = cProfile.Profile()
    wall = 0.0
    for k in range(5):
        expected = latest_version() + 1
        body = json.dumps(new_model(n, 900 + k))
        start = time.perf_counter()
        profiler.enable()
        response = client.post("/api/v1/models", data=body, content_type="application/json")
        profiler.disable()
        wall += time.perf_counter() - start
        assert response.status_code == 201, response.content[:300]
        wait_all_applied(receivers, expected, timeout=CONVERGE_TIMEOUT, worker=worker, log_path=log_path)
        wait_all_recorded(expected)
    out = io.StringIO()
    out.write(f"{'#' * 78}\n5 POSTs /api/v1/models with {n} runtime models in force and {len(receivers)} "
              f"gateways: {wall * 1e3:.0f} ms under the profiler\n")
    stats = pstats.Stats(profiler, stream=out).sort_stats("cumulative")
    stats.print_stats(r"(catalog/|kombu/messaging|celery/app/task)", 30)
    with open(path, "a" if append else "w", encoding="utf-8") as f:
        f.write(out.getvalue() + "\n\n")


def profile_deliveries(n: int, path: str) -> None:
    """What one delivery costs, measured where it can be profiled: the
    service's deliver() for each gateway, run here one after another as a
    worker process runs them. The gateways already have the newest version,
    so the console's record of it is wiped first: each delivery then does
    all its work and the gateway answers 409 with its version (the same
    path, the same document sent, as an acknowledgement)."""
    import cProfile
    import re as regex

    from django.db import connection

    from bench.common import top_functions
    from catalog.models import Gateway
    from catalog.services import gateways

    import logging

    logging.getLogger("llmgw.delivery").setLevel(logging.WARNING)  # one line per push otherwise
    ids = list(Gateway.objects.order_by("pk").values_list("pk", flat=True))
    queries: dict[str, list[float]] = {}

    def timed_query(execute, sql, params, many, context):
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            queries.setdefault(regex.sub(r"\s+", " ", sql)[:100], []).append(time.perf_counter() - start)

    Gateway.objects.update(acked_version=None)
    for gateway_id in ids[:3]:  # warm: the HTTP client, its connections, the cipher
        gateways.deliver(gateway_id)
    Gateway.objects.update(acked_version=None)
    profiler = cProfile.Profile()
    outcomes: dict[str, int] = {}
    with connection.execute_wrapper(timed_query):
        wall = time.perf_counter()
        profiler.enable()
        for gateway_id in ids:
            outcome = gateways.deliver(gateway_id)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        profiler.disable()
        wall = time.perf_counter() - wall
    sql_total = sum(sum(t) for t in queries.values())
    text = [f"{'#' * 78}\n{len(ids)} deliveries with {n} runtime models in force, in this process: "
            f"{wall * 1e3:.0f} ms under the profiler ({wall / len(ids) * 1e3:.1f} ms each), outcomes {outcomes}; "
            f"SQL {sql_total * 1e3:.0f} ms\n\n== SQL, by statement (total ms, calls) ==\n"]
    for sql, times in sorted(queries.items(), key=lambda item: -sum(item[1])):
        text.append(f"{sum(times) * 1e3:9.1f} ms {len(times):4d}x  {sql}\n")
    text.append(top_functions(profiler, count=30))
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(text) + "\n\n")
    progress(f"B4: {len(ids)} deliveries in this process took {wall * 1e3:.0f} ms "
             f"({wall / len(ids) * 1e3:.1f} ms each, SQL {sql_total / len(ids) * 1e3:.1f} ms each); "
             f"profile written to {path}")


if __name__ == "__main__":
    sys.exit(main())
