"""The reference gateway receiver: the gateway side of the catalog protocol.

What the demo and the integration tests push to, and what a gateway
implementer can read to see what the console expects:

- ``PUT /v1/catalog``: 401 without the right bearer token; 422 when the
  body does not parse or its digest does not match its models (the digest
  is ``sha256:`` of the canonical JSON of ``models``); 409
  ``{"version": N}`` when it already applied version N >= the one sent
  (so a late, older delivery never downgrades it); else 200, applied.
- ``GET /v1/catalog``: what it applied (404 before the first).
- ``POST /-/faults`` (same token): make it misbehave for drills —
  ``{"status": 500}`` answers every PUT with that status, ``{"delay": S}``
  waits S seconds first, ``{"reject": true}`` answers 422; ``{}`` heals it.

No Django here: it runs in its own process, as a real gateway would.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MAX_BODY = 64 * 1024 * 1024


def canonical_digest(models: object) -> str:
    body = json.dumps(models, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return "sha256:" + hashlib.sha256(body).hexdigest()


def _raw_models_digest(body: bytes) -> str | None:
    """The digest of the ``models`` bytes as received, when they come last
    (as the console sends them): hashing them beats encoding them again,
    which fifty gateways in one process would otherwise queue for."""
    start = body.find(b',"models":')
    if start < 0 or not body.endswith(b"}"):
        return None
    return "sha256:" + hashlib.sha256(body[start + len(b',"models":'):-1]).hexdigest()


class ReferenceGateway:
    def __init__(self, token: str, state_file: str | None = None):
        self.token = token
        self.state_file = Path(state_file) if state_file else None
        self.lock = threading.Lock()
        self.applied: dict | None = None
        self.faults: dict = {}
        self.received = 0  # PUTs seen, for tests that count deliveries
        if self.state_file and self.state_file.exists():
            self.applied = json.loads(self.state_file.read_text(encoding="utf-8"))

    @property
    def version(self) -> int:
        return self.applied["version"] if self.applied else 0

    @property
    def digest(self) -> str | None:
        return self.applied["digest"] if self.applied else None

    def authorised(self, header: str | None) -> bool:
        return bool(header) and hmac.compare_digest(header.encode(), f"Bearer {self.token}".encode())

    def apply(self, body: bytes) -> tuple[int, dict]:
        """(status, answer) for a pushed document."""
        with self.lock:
            self.received += 1
            faults = dict(self.faults)
        if faults.get("delay"):
            time.sleep(float(faults["delay"]))
        if faults.get("status"):
            return int(faults["status"]), {"detail": "fault injected"}
        if faults.get("reject"):
            return 422, {"detail": "rejected (fault injected)"}
        try:
            document = json.loads(body)
            version, digest, models = document["version"], document["digest"], document["models"]
        except (ValueError, KeyError, TypeError):
            return 422, {"detail": "the body is not a catalog document"}
        if type(version) is not int or not isinstance(models, list):
            return 422, {"detail": "version must be a number and models a list"}
        if _raw_models_digest(body) != digest and canonical_digest(models) != digest:
            return 422, {"detail": "the digest does not match the models"}
        with self.lock:
            if version <= self.version:
                return 409, {"version": self.version}
            self.applied = document
            self._save()
        return 200, {"version": version}

    def _save(self) -> None:
        if not self.state_file:
            return
        # Written beside and renamed, so a crash never leaves half a file.
        fd, tmp = tempfile.mkstemp(dir=self.state_file.parent, prefix=".gateway-")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(self.applied, out)
        os.replace(tmp, self.state_file)

    def handler(self):
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format, *args):  # quiet: tests start many of these
                pass

            def _answer(self, status: int, body: dict | None = None) -> None:
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> bytes | None:
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    return None
                return self.rfile.read(length)

            def do_PUT(self):
                body = self._body()
                if not gateway.authorised(self.headers.get("Authorization")):
                    return self._answer(401, {"detail": "bad token"})
                if self.path.rstrip("/") != "/v1/catalog":
                    return self._answer(404, {"detail": "not found"})
                if body is None:
                    return self._answer(413, {"detail": "too large"})
                self._answer(*gateway.apply(body))

            def do_GET(self):
                if not gateway.authorised(self.headers.get("Authorization")):
                    return self._answer(401, {"detail": "bad token"})
                if self.path.rstrip("/") != "/v1/catalog" or gateway.applied is None:
                    return self._answer(404, {"detail": "nothing applied yet"})
                self._answer(200, gateway.applied)

            def do_POST(self):
                body = self._body()
                if not gateway.authorised(self.headers.get("Authorization")):
                    return self._answer(401, {"detail": "bad token"})
                if self.path != "/-/faults":
                    return self._answer(404, {"detail": "not found"})
                try:
                    faults = json.loads(body or b"{}")
                except ValueError:
                    return self._answer(400, {"detail": "not JSON"})
                with gateway.lock:
                    gateway.faults = faults if isinstance(faults, dict) else {}
                self._answer(200, gateway.faults)

        return Handler

    def server(self, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
        server = _QuietServer((host, port), self.handler())
        server.daemon_threads = True
        return server

    def start(self, host: str = "127.0.0.1", port: int = 0) -> tuple[ThreadingHTTPServer, str]:
        """Serve in a background thread; returns the server and its base URL."""
        server = self.server(host, port)
        threading.Thread(target=server.serve_forever, daemon=True, name="reference-gateway").start()
        return server, f"http://{host}:{server.server_address[1]}"


class _QuietServer(ThreadingHTTPServer):
    """A console that gave up waiting (its push timed out) closes the
    connection under the answer; that is not worth a traceback."""

    def handle_error(self, request, client_address):
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)
