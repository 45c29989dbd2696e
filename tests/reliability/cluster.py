"""A small cluster for the push tests and drills: reference gateways in
threads, a real Celery worker (with beat) in its own process group, and a
Redis server of the drill's own that can be stopped and started.

Test modules import the fixtures they use from here
(``from tests.reliability.cluster import gateway_fleet``), so pytest sees
them as the module's own.

Everything started here is stopped by its fixture's finalizer, worker
first: a worker left running would hold connections to the test database
that pytest-django then fails to flush or drop.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from catalog.reference_gateway import ReferenceGateway

PROJECT = Path(__file__).resolve().parents[2]

# What the drills run the worker with (QUALITY.md): short enough that a
# drill proves convergence in seconds rather than the production minute.
RECONCILE_SECONDS = 1
PUSH_TIMEOUT_SECONDS = 1
BACKOFF_MAX_SECONDS = 2


# --- waiting --------------------------------------------------------------

def wait_until(condition, *, timeout: float, what: str, describe=None, interval: float = 0.05):
    """Poll ``condition`` until it returns something truthy; fail with
    ``what`` (and ``describe()``, for the state at the deadline) if it never
    does within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() >= deadline:
            state = f"\n{describe()}" if describe else ""
            raise AssertionError(f"not within {timeout:g}s: {what}{state}")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def missing_tool(reason: str):
    """Skip, or fail when the run requires the services (CI)."""
    from django.conf import settings

    if settings.LLMGW_REQUIRE_SERVICES:
        pytest.fail(f"{reason} (LLMGW_REQUIRE_SERVICES is set, so this is a failure)", pytrace=False)
    pytest.skip(reason)


# --- reference gateways ---------------------------------------------------

@dataclass(frozen=True)
class Received:
    """One PUT as the gateway saw it."""

    at: float  # time.monotonic() when it arrived
    version: int | None  # the version in the body, when it parsed
    status: int  # what the gateway answered


def _version_in(body: bytes) -> int | None:
    try:
        version = json.loads(body).get("version")
    except (ValueError, AttributeError):
        return None
    return version if type(version) is int else None


class RecordingGateway(ReferenceGateway):
    """The reference gateway, keeping a log of every PUT it answered and
    counting the ones in progress (a delivery is in flight while its PUT
    sits in a delay fault)."""

    def __init__(self, token: str, state_file: str | None = None):
        super().__init__(token, state_file)
        self.log: list[Received] = []
        self.in_flight = 0

    def apply(self, body: bytes) -> tuple[int, dict]:
        arrived = time.monotonic()
        with self.lock:
            self.in_flight += 1
        status = 599
        try:
            status, answer = super().apply(body)
            return status, answer
        finally:
            with self.lock:
                self.in_flight -= 1
                self.log.append(Received(arrived, _version_in(body), status))

    def applied_versions(self) -> list[int]:
        with self.lock:
            return [r.version for r in self.log if r.status == 200]

    def sent_versions(self, *, since: float = 0.0) -> list[int | None]:
        with self.lock:
            return [r.version for r in self.log if r.at >= since]


@dataclass
class RunningGateway:
    name: str
    token: str
    receiver: RecordingGateway
    server: object
    url: str
    _stopped: bool = field(default=False, repr=False)

    @property
    def version(self) -> int:
        return self.receiver.version

    @property
    def received(self) -> int:
        return self.receiver.received

    def set_faults(self, faults: dict) -> None:
        """Over HTTP, as an operator of a real gateway would (``{}`` heals)."""
        response = httpx.post(f"{self.url}/-/faults", json=faults,
                              headers={"Authorization": f"Bearer {self.token}"}, timeout=5)
        assert response.status_code == 200, response.text

    def row(self):
        from catalog.models import Gateway

        return Gateway.objects.get(name=self.name)

    def state(self) -> str:
        from catalog import selectors

        return selectors.gateway_state(self.row(), selectors.latest_catalog_version())

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            self.server.shutdown()
            self.server.server_close()


def serve(receiver: ReferenceGateway, port: int = 0):
    """Start a receiver in a thread; (server, base URL). A short poll
    interval, so that stopping one costs milliseconds, not half a second."""
    server = receiver.server("127.0.0.1", port)
    report = server.handle_error

    def handle_error(request, address):
        # A console that gave up waiting (a drill's timeout) closed the
        # connection before the answer: expected, not worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            report(request, address)

    server.handle_error = handle_error
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
                     name=f"gateway-{server.server_address[1]}").start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def gateway_fleet(tmp_path):
    """``gateway_fleet(name, faults=..., register=True, enabled=True,
    port=0, state_file=None, token=None)``: a reference gateway serving in a thread,
    registered with the console through the service (so its token is
    stored the way the API stores it)."""
    running: list[RunningGateway] = []

    def start(name: str, *, faults: dict | None = None, register: bool = True, enabled: bool = True,
              port: int = 0, state_file: str | None = None, token: str | None = None) -> RunningGateway:
        token = token or f"tok-{name}-{os.urandom(8).hex()}"
        receiver = RecordingGateway(token, state_file)
        receiver.faults = dict(faults or {})
        server, url = serve(receiver, port)
        gateway = RunningGateway(name, token, receiver, server, url)
        running.append(gateway)
        if register:
            from catalog.services.gateways import register_gateway

            register_gateway(name=name, url=url, token=token, enabled=enabled, by="tests")
        return gateway

    yield start
    for gateway in running:
        gateway.stop()


# --- the console's side -----------------------------------------------------

def converged(gateways: list[RunningGateway]) -> bool:
    """Every gateway applied the newest catalog version and the console
    recorded it as in sync."""
    from catalog import selectors
    from catalog.models import Gateway

    latest = selectors.latest_catalog_version()
    if latest is None:
        return False
    rows = {g.name: g for g in Gateway.objects.filter(name__in=[g.name for g in gateways])}
    return all(g.receiver.digest == latest.digest and g.version == latest.version
               and selectors.gateway_state(rows[g.name], latest) == "in_sync" for g in gateways)


def describe(gateways: list[RunningGateway]):
    """For failure messages: what each gateway has and what the console thinks."""
    from catalog import selectors
    from catalog.models import Gateway

    def text() -> str:
        latest = selectors.latest_catalog_version()
        lines = [f"newest catalog version: {latest.version if latest else None}"]
        for g in gateways:
            row = Gateway.objects.filter(name=g.name).first()
            state = selectors.gateway_state(row, latest) if row else "unregistered"
            lines.append(f"  {g.name}: applied v{g.version}, received {g.received}, console says {state} "
                         f"acked={row.acked_version if row else None} "
                         f"error={row.last_error if row else ''!r}")
        return "\n".join(lines)

    return text


# --- a Redis of the drill's own -------------------------------------------

class RedisServer:
    """``redis-server`` on a port of its own, without persistence, so a
    drill can stop and restart it without touching the machine's Redis."""

    def __init__(self, workdir: Path, port: int | None = None):
        self.port = port or free_port()
        self.workdir = workdir
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--daemonize", "no", "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        wait_until(self.answers, timeout=10, what=f"redis-server on port {self.port} answers")

    def answers(self) -> bool:
        import redis

        client = redis.Redis(port=self.port, socket_connect_timeout=0.2, socket_timeout=0.5)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None


@pytest.fixture
def private_redis(tmp_path, settings):
    """A Redis of this test's own, and the test process's Celery pointed at
    it (the worker is given its URL when started)."""
    if shutil.which("redis-server") is None:
        missing_tool("needs redis-server on PATH")
    server = RedisServer(tmp_path)
    server.start()
    previous = use_broker(server.url)
    settings.CELERY_BROKER_URL = server.url
    yield server
    use_broker(previous)
    server.stop()


def use_broker(url: str) -> str:
    """Point this process's Celery app at ``url``; returns the previous URL.
    The pools are dropped so the next publish connects afresh."""
    from llmgw_console.celery import app

    previous = app.conf.broker_url
    app.conf.broker_url = url
    # Forget the connection and producer pools (kombu keeps one per URL,
    # so the previous URL's pool is found again when it is restored).
    app._after_fork()
    return previous


def flush_broker(url: str) -> None:
    """Empty the drill's Redis database: nothing queued, nothing unacked
    from an earlier run may reach the worker."""
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
    try:
        client.flushdb()
    finally:
        client.close()


# --- a real Celery worker -------------------------------------------------

def worker_database_url() -> str:
    """The URL of the database this test runs on (pytest-django's test_…)."""
    from django.db import connection

    conf = connection.settings_dict
    if connection.vendor != "postgresql":
        raise RuntimeError("a worker process needs PostgreSQL: SQLite's test database lives in memory")
    user = quote(conf.get("USER") or "", safe="")
    password = quote(conf.get("PASSWORD") or "", safe="")
    credentials = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    return f"postgres://{credentials}{conf.get('HOST') or '127.0.0.1'}:{conf.get('PORT') or 5432}/{conf['NAME']}"



class Worker:
    """``celery -A llmgw_console worker -B`` in a process group of its own,
    on the test database and the given broker, logging to a file."""

    def __init__(self, *, broker_url: str, workdir: Path, name: str, pool: str = "solo", concurrency: int = 1):
        from django.conf import settings

        self.broker_url = broker_url
        self.log_path = workdir / f"{name}.log"
        self.schedule_path = workdir / f"{name}-beat-schedule"
        self.name = name
        self.pool = pool
        self.concurrency = concurrency
        self.process: subprocess.Popen | None = None
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "llmgw_console.settings",
            "DATABASE_URL": worker_database_url(),
            "CELERY_BROKER_URL": broker_url,
            "LLMGW_RECONCILE_SECONDS": str(RECONCILE_SECONDS),
            "LLMGW_PUSH_TIMEOUT_SECONDS": str(PUSH_TIMEOUT_SECONDS),
            "LLMGW_PUSH_BACKOFF_MAX_SECONDS": str(BACKOFF_MAX_SECONDS),
            # Gateway tokens are encrypted with a key derived from these:
            # the worker must read back what the test process stored.
            "DJANGO_SECRET_KEY": settings.SECRET_KEY,
            "LLMGW_ENCRYPTION_KEY": settings.LLMGW_ENCRYPTION_KEY,
            "LLMGW_SETTINGS_FILE": str(settings.LLMGW_SETTINGS_FILE),
            "LLMGW_TASKS_INLINE": "0",
            "PYTHONUNBUFFERED": "1",
        }

    def start(self) -> Worker:
        command = [sys.executable, "-m", "celery", "-A", "llmgw_console", "worker", "-B",
                   "-s", str(self.schedule_path), "-n", f"{self.name}-{os.getpid()}@%h", "-l", "info",
                   "--pool", self.pool, "--without-gossip", "--without-mingle", "--without-heartbeat"]
        if self.pool != "solo":
            command += ["-c", str(self.concurrency)]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, cwd=PROJECT, env=self.env, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(self._ready, timeout=30, what=f"worker {self.name} is ready", describe=self.tail)
        return self

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"worker {self.name} exited with {self.process.returncode}\n{self.tail()}")
        return " ready." in self.log()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def tail(self, lines: int = 40) -> str:
        return f"--- {self.log_path} (last {lines} lines) ---\n" + "\n".join(self.log().splitlines()[-lines:])

    def reconciles(self) -> int:
        """How many reconcile runs (beat) this worker finished."""
        return sum(1 for line in self.log().splitlines()
                   if "catalog.tasks.reconcile[" in line and " succeeded " in line)

    def kill(self) -> None:
        """SIGKILL the whole group: the worker, its pool children and beat."""
        if self.process is None or self.process.poll() is not None and not self._group_alive():
            return
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)
        wait_until(lambda: not self._group_alive(), timeout=10, what=f"worker {self.name}'s processes are gone")

    def _group_alive(self) -> bool:
        """Whether a process of the group still runs. A killed child that
        nobody reaped yet (a zombie) holds nothing and does not count."""
        proc = Path("/proc")
        if not proc.is_dir():
            try:
                os.killpg(self.process.pid, 0)
            except ProcessLookupError:
                return False
            return True
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            state, _parent, group = stat.rsplit(")", 1)[1].split()[:3]
            if int(group) == self.process.pid and state not in ("Z", "X"):
                return True
        return False


@pytest.fixture
def celery_workers(transactional_db, tmp_path):
    """``celery_workers(broker_url, pool=..., concurrency=...)`` starts a
    worker with beat on the test database; every one is killed at the end,
    before the test database is flushed."""
    from llmgw_console.celery import app

    # This process must publish tasks to the broker, not run them itself.
    # app.conf reads Django settings live, but a value set on it directly
    # (an earlier test's fixture may leave task_always_eager=True there)
    # overrides them until removed.
    missing = object()
    pinned = app.conf.changes.get("task_always_eager", missing)
    app.conf.task_always_eager = False
    started: list[Worker] = []

    def start(broker_url: str, *, pool: str = "solo", concurrency: int = 1) -> Worker:
        worker = Worker(broker_url=broker_url, workdir=tmp_path, name=f"worker{len(started) + 1}", pool=pool,
                        concurrency=concurrency)
        started.append(worker)
        return worker.start()

    yield start
    for worker in started:
        worker.kill()
    if pinned is missing:
        app.conf.changes.pop("task_always_eager", None)
    else:
        app.conf.task_always_eager = pinned
