"""Drill R7 (QUALITY.md): PostgreSQL restarted under traffic.

A PostgreSQL of the drill's own (initdb on a free port, so the machine's
PostgreSQL that other tests use is never touched), the console served by a
real gunicorn with two workers against it, and a thread of API traffic:
list the models, add one, pull the catalog, ask for health, and (logged in
through the login form) open the Models page.

PostgreSQL is stopped while that traffic runs, kept down until every kind
of request has been answered at least once without it, then started again.

What must hold: no 500 and no dropped connection at any time; while the
database is down the API answers 503 in its error shape
``{"detail": ..., "errors": {...}}``, health says the database is
"unavailable", and the page is a plain 503 page, not a traceback; once
PostgreSQL is back every kind of request succeeds again within seconds, a
new model added then is listed, and the same gunicorn workers serve all of
it (nothing was restarted).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.reliability.cluster import PROJECT, free_port, missing_tool, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

# How long the console may take to answer normally again once PostgreSQL
# accepts connections (QUALITY.md: "then recover").
RECOVER_SECONDS = 15
# Each request's timeout: a request that hangs this long while the
# database is down is a console that does not fail fast.
REQUEST_TIMEOUT = 10
# The shortest outage: long enough for a few rounds of traffic on a slow machine.
MIN_DOWN_SECONDS = 1
PASSWORD_VAR = "R7_OPERATOR_PASSWORD"


# --- a PostgreSQL of the drill's own ----------------------------------------

def _postgres_bin() -> Path | None:
    root = Path("/usr/lib/postgresql")
    versions = [p for p in root.iterdir() if p.name.isdigit()] if root.is_dir() else []
    for version in sorted(versions, key=lambda p: int(p.name), reverse=True):
        binaries = version / "bin"
        if all((binaries / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return binaries
    found = shutil.which("pg_ctl")
    return Path(found).parent if found and shutil.which("initdb") else None


class PrivatePostgres:
    """initdb in a temporary directory, served on a free port of 127.0.0.1
    with trust authentication; run as the ``postgres`` user when the test
    runs as root (initdb refuses root)."""

    def __init__(self, binaries: Path):
        self.binaries = binaries
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="llmgw-r7-"))
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
        self.options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
                        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off")

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        command = [str(self.binaries / tool), *args]
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        result = subprocess.run(command, cwd=self.root, capture_output=True, text=True, timeout=timeout,
                                start_new_session=True)
        if result.returncode != 0:
            raise AssertionError(f"{tool} {' '.join(args)} failed ({result.returncode}):\n"
                                 f"{result.stdout}{result.stderr}\n{self.tail()}")
        return result

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")

    def start(self) -> None:
        self._run("pg_ctl", "start", "-D", str(self.data), "-w", "-t", "30", "-l", str(self.log),
                  "-o", self.options)

    def stop(self) -> None:
        self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "fast", "-w", "-t", "30")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def destroy(self) -> None:
        """Stop the server however it is (immediate: nothing here is kept)
        and remove its directory."""
        try:
            if self.data.is_dir() and self.running():
                self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w", "-t", "30")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def tail(self, lines: int = 20) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return f"--- {self.log} ---\n" + "\n".join(text.splitlines()[-lines:])


# --- the console as a real server ------------------------------------------

class Console:
    """``manage.py`` commands and ``gunicorn -w 2`` on the private database,
    without a broker (tasks in process), gunicorn in its own process group."""

    def __init__(self, database_url: str, workdir: Path):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "gunicorn.log"
        self.access_log = workdir / "access.log"
        self.process: subprocess.Popen | None = None
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("DJANGO_", "LLMGW_", "CELERY_")) and k != "DATABASE_URL"}
        self.env = {
            **env,
            "DJANGO_SETTINGS_MODULE": "llmgw_console.settings",
            "DATABASE_URL": database_url,
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
            "DJANGO_DEBUG": "0",
            "LLMGW_SETTINGS_FILE": str(PROJECT / "examples" / "llmgw.yaml"),
            PASSWORD_VAR: secrets.token_urlsafe(24),
            "PYTHONUNBUFFERED": "1",
        }

    @property
    def password(self) -> str:
        return self.env[PASSWORD_VAR]

    def manage(self, *args: str) -> str:
        result = subprocess.run([sys.executable, "manage.py", *args], cwd=PROJECT, env=self.env,
                                capture_output=True, text=True, timeout=120, start_new_session=True)
        assert result.returncode == 0, f"manage.py {' '.join(args)} failed:\n{result.stdout}{result.stderr}"
        return result.stdout

    def serve(self) -> None:
        command = [sys.executable, "-m", "gunicorn", "llmgw_console.wsgi", "-w", "2", "-b", f"127.0.0.1:{self.port}",
                   "--timeout", "60", "--graceful-timeout", "2",
                   "--access-logfile", str(self.access_log), "--access-logformat", "%(p)s %(s)s %(m)s %(U)s"]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, cwd=PROJECT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        wait_until(self._healthy, timeout=60, what="the console answers /api/v1/health with 200", describe=self.tail)

    def _healthy(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"gunicorn exited with {self.process.returncode}\n{self.tail()}")
        try:
            return httpx.get(f"{self.base}/api/v1/health", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def access_log_size(self) -> int:
        try:
            return self.access_log.stat().st_size
        except OSError:
            return 0

    def workers_that_succeeded(self, *, since: int) -> set[str]:
        """The worker processes that answered a 2xx after byte ``since`` of the access log."""
        try:
            with open(self.access_log, "rb") as log:
                log.seek(since)
                lines = log.read().decode(errors="replace").splitlines()
        except OSError:
            return set()
        return {fields[0] for fields in map(str.split, lines) if len(fields) >= 2 and fields[1].startswith("2")}

    def booted_workers(self) -> int:
        return self.log().count("Booting worker with pid")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 40) -> str:
        return f"--- {self.log_path} (last {lines} lines) ---\n" + "\n".join(self.log().splitlines()[-lines:])

    def kill(self) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)


@pytest.fixture
def private_postgres():
    binaries = _postgres_bin()
    if binaries is None:
        missing_tool("needs PostgreSQL's server binaries (initdb, pg_ctl), e.g. /usr/lib/postgresql/*/bin")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        missing_tool("needs runuser to run initdb as the postgres user (initdb refuses root)")
    server = PrivatePostgres(binaries)
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.destroy()


@pytest.fixture
def console(private_postgres):
    workdir = Path(tempfile.mkdtemp(prefix="llmgw-r7-console-"))
    running = Console(private_postgres.url, workdir)
    try:
        running.manage("migrate", "--no-input", "-v", "0")
        running.manage("users", "add", "op", "--role", "operator", "--password-from-env", PASSWORD_VAR)
        running.token = running.manage("tokens", "create", "op").strip()
        running.serve()
        yield running
    finally:
        # Gunicorn first: its workers hold connections to the private database.
        running.kill()
        shutil.rmtree(workdir, ignore_errors=True)


# --- traffic ---------------------------------------------------------------

@dataclass(frozen=True)
class Answer:
    kind: str  # list, add, catalog, health, page
    sent: float  # time.monotonic()
    done: float
    status: int  # 0: no answer (the connection failed or timed out)
    content_type: str
    body: object  # the parsed JSON, or the text when it is not JSON
    is_json: bool
    error: str = ""

    def __str__(self) -> str:
        body = self.body if self.is_json else str(self.body)[:200]
        return f"{self.kind} -> {self.status} {self.content_type!r} {self.error or body!r}"


def api_error_shape(body) -> bool:
    return (isinstance(body, dict) and isinstance(body.get("detail"), str) and body["detail"]
            and isinstance(body.get("errors"), dict))


class Traffic:
    """One thread going round the requests until stopped, recording every
    answer. Adds use a fresh name each time, so nothing but 201 or 503 is
    a right answer to them."""

    KINDS = ("list", "add", "catalog", "health", "page")

    def __init__(self, console: Console, page_client: httpx.Client):
        self.console = console
        self.api = httpx.Client(base_url=console.base, timeout=REQUEST_TIMEOUT,
                                headers={"Authorization": f"Bearer {console.token}"})
        self.page = page_client
        self.answers: list[Answer] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.added = 0
        self.thread = threading.Thread(target=self._run, name="r7-traffic", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=4 * REQUEST_TIMEOUT)
        self.api.close()

    def _run(self) -> None:
        while not self.stopping.is_set():
            for kind in self.KINDS:
                if self.stopping.is_set():
                    return
                self.record(kind, *self.request(kind))

    def request(self, kind: str):
        if kind == "list":
            return self.api.get, "/api/v1/models", {}
        if kind == "add":
            self.added += 1
            n = self.added
            return self.api.post, "/api/v1/models", {"json": {"name": f"r7/m-{n}", "source": f"hf://org/m-{n}"}}
        if kind == "catalog":
            return self.api.get, "/api/v1/catalog", {}
        if kind == "health":
            return self.api.get, "/api/v1/health", {}
        return self.page.get, "/models/", {}

    def record(self, kind: str, call, path: str, kwargs: dict) -> Answer:
        sent = time.monotonic()
        try:
            response = call(path, **kwargs)
        except httpx.HTTPError as exc:
            answer = Answer(kind, sent, time.monotonic(), 0, "", None, False, f"{type(exc).__name__}: {exc}")
        else:
            try:
                body, is_json = response.json(), True
            except ValueError:
                body, is_json = response.text, False
            answer = Answer(kind, sent, time.monotonic(), response.status_code,
                            response.headers.get("content-type", ""), body, is_json)
        with self.lock:
            self.answers.append(answer)
        return answer

    def snapshot(self) -> list[Answer]:
        with self.lock:
            return list(self.answers)

    def between(self, start: float, end: float = float("inf")) -> list[Answer]:
        """Answers to requests sent at or after ``start`` and answered by ``end``."""
        return [a for a in self.snapshot() if a.sent >= start and a.done <= end]

    def describe(self, answers=None):
        def text() -> str:
            shown = (answers if answers is not None else self.snapshot())[-30:]
            return "last answers:\n" + "\n".join(f"  {a}" for a in shown)

        return text


def log_in(console: Console) -> httpx.Client:
    """A browser's session: the login form, with its CSRF token."""
    client = httpx.Client(base_url=console.base, timeout=REQUEST_TIMEOUT)
    form = client.get("/login/")
    assert form.status_code == 200, form.text[:500]
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
    assert token, "the login form carries no CSRF token"
    done = client.post("/login/", data={"csrfmiddlewaretoken": token.group(1), "username": "op",
                                        "password": console.password},
                       headers={"Referer": f"{console.base}/login/"})
    assert done.status_code == 302, f"login refused: {done.status_code} {done.text[:500]}"
    return client


# What each request may answer besides 503 while the database is away.
SUCCESS = {"list": {200}, "add": {201}, "catalog": {200}, "health": {200}, "page": {200}}


def check_answer(answer: Answer) -> str | None:
    """What is wrong with one answer, whenever it came; None when nothing."""
    if answer.status == 0:
        return f"no answer at all ({answer.error})"
    if answer.status not in SUCCESS[answer.kind] | {503}:
        return f"answered {answer.status}"
    if answer.status != 503:
        return None
    if answer.kind == "page":
        if not answer.content_type.startswith("text/html"):
            return "a 503 page that is not HTML"
        if "Traceback" in answer.body or "The database is unavailable" not in answer.body:
            return "a 503 page that is not the plain database-unavailable page"
        return None
    if not (answer.content_type.startswith("application/json") and answer.is_json):
        return "a 503 whose body is not JSON"
    if answer.kind == "health":
        if answer.body.get("database") != "unavailable":
            return "health answered 503 without saying the database is unavailable"
        return None
    if not api_error_shape(answer.body):
        return 'a 503 not in the API\'s error shape {"detail": ..., "errors": {...}}'
    return None


def burst(console: Console, size: int = 6) -> list[int]:
    """``size`` concurrent GET /api/v1/models, so that both workers get some; their statuses."""
    def one(_):
        try:
            return httpx.get(f"{console.base}/api/v1/models", timeout=REQUEST_TIMEOUT,
                             headers={"Authorization": f"Bearer {console.token}"}).status_code
        except httpx.HTTPError:
            return 0

    with ThreadPoolExecutor(size) as pool:
        return list(pool.map(one, range(size)))


def all_succeeded(answers: list[Answer]) -> bool:
    """Every kind of request answered successfully at least once, and the
    last answer of each kind is a success."""
    last = {a.kind: a for a in answers}
    return set(last) == set(Traffic.KINDS) and all(a.status in SUCCESS[a.kind] for a in last.values())


def test_console_answers_503_while_postgres_restarts_then_recovers_without_a_restart(private_postgres, console):
    page_client = log_in(console)
    traffic = Traffic(console, page_client)
    try:
        # Traffic first runs against a database that is up: all of it succeeds.
        traffic.start()
        wait_until(lambda: all_succeeded(traffic.snapshot()), timeout=30,
                   what="every kind of request succeeds before the restart", describe=traffic.describe())

        private_postgres.stop()
        down = time.monotonic()
        # Keep PostgreSQL down for a while, and until every kind of request
        # was answered without it: the outage is observed however slow the
        # machine, and the console has time to notice its connections died.
        wait_until(lambda: time.monotonic() - down >= MIN_DOWN_SECONDS
                   and {a.kind for a in traffic.between(down)} >= set(Traffic.KINDS),
                   timeout=4 * REQUEST_TIMEOUT, what="every kind of request is answered while PostgreSQL is down",
                   describe=traffic.describe())
        up_again = time.monotonic()
        while_down = traffic.between(down, up_again)
        private_postgres.start()
        back = time.monotonic()
        access_since = console.access_log_size()

        wait_until(lambda: all_succeeded(traffic.between(back)), timeout=RECOVER_SECONDS,
                   what="every kind of request succeeds again after PostgreSQL is back",
                   describe=lambda: traffic.describe()() + "\n" + console.tail())
        recovered = time.monotonic()
        # Both gunicorn workers found the database again: bursts of
        # concurrent reads, all answered 200, until each worker answered some.
        bursts = []

        def both_workers_answered() -> bool:
            bursts.append(burst(console))
            return len(console.workers_that_succeeded(since=access_since)) >= 2

        wait_until(both_workers_answered, timeout=30, interval=0.2,
                   what="both gunicorn workers answer successfully again",
                   describe=lambda: f"bursts: {bursts}\n{console.tail()}")
        assert all(statuses == [200] * len(statuses) for statuses in bursts), bursts
    finally:
        traffic.stop()
        page_client.close()

    answers = traffic.snapshot()
    wrong = [f"{a}: {problem}" for a in answers if (problem := check_answer(a))]
    assert not wrong, "wrong answers during the drill:\n" + "\n".join(wrong[:20]) + "\n" + console.tail()

    # While the database was down, requests failed, and said so with 503.
    failed_while_down = {a.kind for a in while_down if a.status == 503}
    # Writes and health cannot succeed without the database, whatever is cached.
    assert {"add", "health"} <= failed_while_down, "\n".join(str(a) for a in while_down)

    # Once recovered, nothing failed any more.
    after = [a for a in answers if a.sent >= recovered]
    assert after and all(a.status in SUCCESS[a.kind] for a in after), "\n".join(str(a) for a in after)

    # A model added now is listed, by the same console.
    with httpx.Client(base_url=console.base, timeout=REQUEST_TIMEOUT,
                      headers={"Authorization": f"Bearer {console.token}"}) as api:
        added = api.post("/api/v1/models", json={"name": "r7/after-restart", "source": "hf://org/after-restart"})
        assert added.status_code == 201, added.text
        listed = api.get("/api/v1/models", params={"q": "r7/after-restart"})
        assert listed.status_code == 200, listed.text
        assert [m["name"] for m in listed.json()["results"]] == ["r7/after-restart"]
        # Every add the console acknowledged, before, during or after the outage, is kept.
        acknowledged = {a.body["name"] for a in answers if a.kind == "add" and a.status == 201}
        everything = api.get("/api/v1/models", params={"q": "r7/m-", "page_size": 1000})
        assert everything.status_code == 200, everything.text
        assert acknowledged - {m["name"] for m in everything.json()["results"]} == set()

    assert console.process.poll() is None, console.tail()
    assert console.booted_workers() == 2, "a gunicorn worker was restarted:\n" + console.tail()
