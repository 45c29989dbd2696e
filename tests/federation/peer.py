"""Two clusters for the federation tests.

``east`` is a second console in a process of its own, with its own SQLite
database and settings file, served by ``manage.py runserver``: the peer
cluster. ``west`` is this test process's Django (the ``db`` fixture's
database), which fetches east's offer over HTTP like the periodic task does.

East is prepared (``manage.py migrate``, ``users add``, ``tokens create``)
and started once per session, since a console takes seconds to start; the
``east`` fixture puts it back as each test found it. Test modules import
the fixtures they use from here (``from tests.federation.peer import
east``), so pytest sees them as the module's own.

Also here: ``StubPeer``, a peer that answers whatever a test tells it to
(garbage included), and ``WestOverHttp``, which lets east reach this
process's console over real HTTP while a call to east is in progress.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import yaml

PROJECT = Path(__file__).resolve().parents[2]
_VENV_PYTHON = PROJECT / ".venv" / "bin" / "python"
PYTHON = str(_VENV_PYTHON if _VENV_PYTHON.exists() else sys.executable)

START_TIMEOUT = 30  # seconds for a peer console to answer /api/v1/health

# What east runs: its own declared model, runtime models added through its
# API once it runs, and a peer ``west`` (this process) at an address nothing
# listens on until a test points it at WestOverHttp.
EAST_DECLARED = {"name": "chat", "aliases": ["chat-latest"], "description": "east's general chat model",
                 "source": "hf://east-org/chat"}
EAST_RUNTIME = [
    {"name": "coder", "engine": "sglang", "description": "code completion", "source": "hf://east-org/coder"},
    {"name": "foo", "aliases": ["foo-alias"], "source": "hf://east-org/foo"},
    {"name": "bar", "description": "what west's runtime models fall back to", "source": "hf://east-org/bar"},
]
# Every local model east offers (name -> aliases), as east names them.
EAST_LOCAL = {"chat": ["chat-latest"], "coder": [], "foo": ["foo-alias"], "bar": []}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def closed_url() -> str:
    """An address where nothing listens (the port was free a moment ago)."""
    return f"http://127.0.0.1:{free_port()}"


def east_settings(token: str) -> dict:
    return {
        "listen": "127.0.0.1:8000",
        "node_name": "east-1",
        "cluster_name": "east",
        "engines": ["vllm", "sglang"],
        "defaults": {"engine": "vllm", "scaling": {"min": 1, "max": 1}},
        "models": [EAST_DECLARED],
        "federation": {"peers": [{"name": "west", "url": closed_url(), "token": token}], "offer": "all"},
    }


@dataclass
class PreparedEast:
    """East's migrated database and settings file, with an admin's token."""

    directory: Path
    shared_token: str  # east's peer token for west, and west's for east
    admin_token: str
    secret_key: str

    @property
    def database(self) -> Path:
        return self.directory / "peer.sqlite3"

    @property
    def settings_path(self) -> Path:
        return self.directory / "east.yaml"


def _env(database: Path, settings_path: Path, secret_key: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "CELERY_BROKER_URL") and not k.startswith("LLMGW_")}
    env.update(
        DJANGO_SETTINGS_MODULE="llmgw_console.settings",
        DATABASE_URL=f"sqlite:///{database}",
        LLMGW_SETTINGS_FILE=str(settings_path),
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        DJANGO_SECRET_KEY=secret_key,
        # East fetches its own peers only when a test asks it to.
        LLMGW_FEDERATION_SECONDS="3600",
        LLMGW_PUSH_TIMEOUT_SECONDS="2",
        PYTHONUNBUFFERED="1",
    )
    return env


def _manage(env: dict, *args: str) -> str:
    done = subprocess.run([PYTHON, "manage.py", *args], cwd=PROJECT, env=env,
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise AssertionError(f"manage.py {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return done.stdout


def prepare_east(directory: Path) -> PreparedEast:
    shared = f"fed-{secrets.token_urlsafe(18)}"
    secret_key = secrets.token_urlsafe(40)
    prepared = PreparedEast(directory, shared, "", secret_key)
    prepared.settings_path.write_text(yaml.safe_dump(east_settings(shared), sort_keys=False))
    env = _env(prepared.database, prepared.settings_path, secret_key)
    _manage(env, "migrate", "--noinput", "-v", "0")
    _manage(env, "users", "add", "east-admin", "--role", "admin")
    prepared.admin_token = _manage(env, "tokens", "create", "east-admin").strip()
    return prepared


@dataclass
class PeerCluster:
    """A console running in its own process: east."""

    name: str
    directory: Path
    env: dict
    shared_token: str
    admin_token: str
    port: int = 0
    process: subprocess.Popen | None = None
    log_path: Path = field(init=False)

    def __post_init__(self):
        self.log_path = self.directory / "runserver.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, port: int | None = None) -> PeerCluster:
        self.port = port or free_port()
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [PYTHON, "manage.py", "runserver", f"127.0.0.1:{self.port}", "--noreload", "--skip-checks"],
                cwd=PROJECT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while not self._answers():
            if self.process.poll() is not None:
                raise AssertionError(f"peer {self.name} exited with {self.process.returncode}\n{self.tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"peer {self.name} did not answer within {START_TIMEOUT}s\n{self.tail()}")
            time.sleep(0.1)
        return self

    def _answers(self) -> bool:
        try:
            return httpx.get(f"{self.url}/api/v1/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            text = ""
        return f"--- {self.log_path} ---\n" + "\n".join(text.splitlines()[-lines:])

    # --- east's API, as its admin --------------------------------------------

    def request(self, method: str, path: str, *, token: str | None = None, **kwargs) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token or self.admin_token}", **kwargs.pop("headers", {})}
        return httpx.request(method, f"{self.url}/api/v1/{path.lstrip('/')}", headers=headers, timeout=15, **kwargs)

    def checked(self, method: str, path: str, expected: int, **kwargs) -> httpx.Response:
        response = self.request(method, path, **kwargs)
        assert response.status_code == expected, f"{method} {path} on {self.name}: {response.status_code} " \
                                                 f"{response.text[:500]}\n{self.tail()}"
        return response

    def add_model(self, definition: dict) -> dict:
        return self.checked("POST", "models", 201, json=definition).json()

    def remove_model(self, name: str) -> None:
        self.checked("DELETE", f"models/{name}", 204)

    def offer(self, *, token: str | None = None, etag: str | None = None) -> httpx.Response:
        headers = {"If-None-Match": etag} if etag else {}
        return self.request("GET", "federation/offer", token=token or self.shared_token, headers=headers)

    def model_names(self, *, kind: str | None = None) -> set[str]:
        params = {"page_size": 1000, **({"kind": kind} if kind else {})}
        return {m["name"] for m in self.checked("GET", "models", 200, params=params).json()["results"]}

    def catalog_names(self, *, peer: str | None = None) -> set[str]:
        """The names in east's catalog document, what its gateways route by
        (of one peer's models only, when ``peer`` is given)."""
        models = self.checked("GET", "catalog", 200).json()["models"]
        return {m["name"] for m in models if peer is None or m.get("peer") == peer}

    def restore(self) -> None:
        """Running, with exactly the runtime models of EAST_RUNTIME."""
        if self.process is None or self.process.poll() is not None:
            self.start(port=self.port)
        expected = {m["name"]: m for m in EAST_RUNTIME}
        present = self.model_names(kind="runtime")
        for name in sorted(present - set(expected)):
            self.checked("DELETE", f"models/{name}", 204)
        for name in sorted(set(expected) - present):
            self.add_model(expected[name])

    def set_setting(self, key: str, value) -> None:
        version = self.checked("GET", "settings", 200).json()["version"]
        self.checked("PUT", f"settings/keys/{key}", 200, json={"value": value, "base_version": version})


_east: PeerCluster | None = None


@pytest.fixture(scope="session")
def east_cluster(request, tmp_path_factory) -> PeerCluster:
    """East, started once for the whole session (a console takes seconds to
    start) and stopped when the session ends; tests use it through ``east``,
    which puts it back. Each module that imports this fixture gets a fixture
    of its own, hence the one running east kept here."""
    global _east
    if _east is None:
        directory = tmp_path_factory.mktemp("east")
        prepared = prepare_east(directory)
        env = _env(prepared.database, prepared.settings_path, prepared.secret_key)
        peer = PeerCluster("east", directory, env, prepared.shared_token, prepared.admin_token)
        request.config.add_cleanup(peer.stop)
        peer.start()
        for definition in EAST_RUNTIME:
            peer.add_model(definition)
        _east = peer
    return _east


@pytest.fixture
def east(east_cluster):
    """East, offering its declared model ``chat`` and the runtime models
    ``coder``, ``foo`` and ``bar``. A test may stop it, or add and remove
    runtime models: it is put back as it was afterwards."""
    yield east_cluster
    east_cluster.restore()


# --- west: this process ----------------------------------------------------------

def configure_west(settings_file, peers: list[dict], *, offer=None, models: list[dict] | None = None) -> dict:
    """Our settings file: the tests' cluster, named west, with these peers.
    Call it before the first catalog access of a test (it is imported then)."""
    document = yaml.safe_load(settings_file.path.read_text())
    document["cluster_name"] = "west"
    document["federation"] = {"peers": peers, **({"offer": offer} if offer is not None else {})}
    if models is not None:
        document["models"] = models
    settings_file.write(document)
    return document


def peer_entry(peer, *, name: str = "east", url: str | None = None, token: str | None = None) -> dict:
    return {"name": name, "url": url or peer.url, "token": token or peer.shared_token}


def our_models(api, **params) -> dict[str, dict]:
    """Our GET /api/v1/models, by name."""
    response = api.get("/api/v1/models", {"page_size": 1000, **params})
    assert response.status_code == 200, response.content[:500]
    return {m["name"]: m for m in response.json()["results"]}


def our_peers(api) -> dict[str, dict]:
    response = api.get("/api/v1/federation/peers")
    assert response.status_code == 200, response.content[:500]
    return {p["name"]: p for p in response.json()["results"]}


def our_skipped(api) -> dict[str, dict]:
    response = api.get("/api/v1/skipped")
    assert response.status_code == 200, response.content[:500]
    return {s["name"]: s for s in response.json()["results"]}


def catalog_versions() -> int:
    from catalog.models import CatalogVersion

    return CatalogVersion.objects.count()


# --- a peer that answers what it is told --------------------------------------------

class StubPeer:
    """A peer cluster reduced to its offer endpoint: answers every GET with
    ``status``, ``body`` and ``headers`` (all settable between fetches) and
    records the request headers it got."""

    def __init__(self):
        self.status = 200
        self.body: bytes = b'{"models": []}'
        self.headers: dict[str, str] = {"Content-Type": "application/json"}
        self.requests: list[dict[str, str]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                stub.requests.append({k.lower(): v for k, v in self.headers.items()})
                self.send_response(stub.status)
                for key, value in stub.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(stub.body)))
                self.end_headers()
                self.wfile.write(stub.body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def offer(self, models: list, *, etag: str | None = None) -> None:
        self.status = 200
        self.body = json.dumps({"cluster": "stub", "models": models}).encode()
        self.headers = {"Content-Type": "application/json", **({"ETag": etag} if etag else {})}

    def answer(self, status: int, body: bytes | str, content_type: str = "application/json") -> None:
        self.status = status
        self.body = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
        self.headers = {"Content-Type": content_type}

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub_peers():
    """``stub_peers()``: a new StubPeer, stopped after the test."""
    started: list[StubPeer] = []

    def start() -> StubPeer:
        started.append(StubPeer())
        return started[-1]

    yield start
    for stub in started:
        stub.stop()


# --- west reachable over HTTP ------------------------------------------------------

class WestOverHttp:
    """This process's console on a real port, for the length of one call.

    The test's database lives in the test's thread (and, on SQLite, in its
    memory), so requests are served in that thread: ``while_serving(call)``
    runs ``call`` (say, a request to east that makes east fetch from us) in
    a helper thread and answers HTTP here until it returns. Each request
    goes through Django's whole stack (middleware, authentication, view).
    """

    def __init__(self):
        from django.test import Client

        west = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "if-none-match")}
                west.seen.append(self.path)
                response = Client().get(self.path, headers=headers)
                self.send_response(response.status_code)
                for key in ("Content-Type", "ETag"):
                    if response.has_header(key):
                        self.send_header(key, response[key])
                body = response.content
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.seen: list[str] = []
        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.server.timeout = 0.05
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def while_serving(self, call):
        outcome: dict = {}

        def run():
            try:
                outcome["value"] = call()
            except BaseException as exc:  # re-raised in the test's thread
                outcome["error"] = exc

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        deadline = time.monotonic() + 60
        while worker.is_alive() and time.monotonic() < deadline:
            self.server.handle_request()
        worker.join(timeout=1)
        if "error" in outcome:
            raise outcome["error"]
        if "value" not in outcome:
            raise AssertionError("the call made while serving west did not return within 60s")
        return outcome["value"]

    def close(self) -> None:
        self.server.server_close()


@pytest.fixture
def west_over_http():
    west = WestOverHttp()
    yield west
    west.close()
