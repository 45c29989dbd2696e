"""The reference gateway receiver (SPEC §5): the gateway side of the
protocol that the demo and the drills push to. Plain HTTP, no database."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys

import httpx
import pytest

from catalog.reference_gateway import ReferenceGateway
from tests.reliability.cluster import PROJECT, free_port, serve, wait_until

TOKEN = "tok-reference-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def digest_of(models: list) -> str:
    canonical = json.dumps(models, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def document(version: int, *names: str) -> dict:
    models = [{"name": n, "engine": "vllm", "aliases": [], "description": "ünïcode"} for n in names or ("m",)]
    return {"version": version, "digest": digest_of(models), "created_at": "2025-01-01T00:00:00Z",
            "settings_version": 1, "models": models}


@pytest.fixture
def reference(tmp_path):
    """(receiver, base URL), serving in a thread."""
    receiver = ReferenceGateway(TOKEN)
    server, url = serve(receiver)
    yield receiver, url
    server.shutdown()
    server.server_close()


def put(url: str, body, headers=AUTH) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.put(f"{url}/v1/catalog", content=content, headers=headers, timeout=5)


def get(url: str, headers=AUTH) -> httpx.Response:
    return httpx.get(f"{url}/v1/catalog", headers=headers, timeout=5)


def test_it_applies_a_valid_catalog_and_serves_it_back(reference):
    receiver, url = reference
    assert get(url).status_code == 404  # nothing applied yet

    response = put(url, document(3, "a", "b"))

    assert (response.status_code, response.json()) == (200, {"version": 3})
    assert get(url).json() == document(3, "a", "b")
    assert receiver.version == 3


@pytest.mark.parametrize("version", [2, 3])
def test_an_older_or_equal_version_is_answered_409_with_the_version_it_keeps(reference, version):
    receiver, url = reference
    put(url, document(3, "new"))

    response = put(url, document(version, "old"))

    assert (response.status_code, response.json()) == (409, {"version": 3})
    assert get(url).json() == document(3, "new")


def test_a_digest_that_does_not_match_the_models_is_rejected_with_422(reference):
    receiver, url = reference
    put(url, document(1, "a"))
    tampered = document(2, "a")
    tampered["models"][0]["engine"] = "sglang"

    response = put(url, tampered)

    assert response.status_code == 422 and "digest" in response.json()["detail"]
    assert get(url).json() == document(1, "a")


@pytest.mark.parametrize("body", [
    b"not json",
    b"[]",
    b"{}",
    json.dumps({"version": 2, "digest": "sha256:x"}).encode(),
    json.dumps({**document(2), "version": "2"}).encode(),
    json.dumps({**document(2), "models": {"a": 1}}).encode(),
])
def test_a_body_that_is_not_a_catalog_document_is_rejected_with_422(reference, body):
    receiver, url = reference

    response = put(url, body)

    assert response.status_code == 422 and response.json()["detail"]
    assert receiver.version == 0


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-token-0123456789"},
                                     {"Authorization": TOKEN}])
def test_a_missing_or_wrong_token_is_401_for_every_call(reference, headers):
    receiver, url = reference
    put(url, document(1))

    assert put(url, document(2), headers=headers).status_code == 401
    assert get(url, headers=headers).status_code == 401
    assert httpx.post(f"{url}/-/faults", json={"status": 500}, headers=headers).status_code == 401
    assert receiver.version == 1 and receiver.faults == {}


def test_faults_set_over_http_make_it_misbehave_until_healed(reference):
    receiver, url = reference

    assert httpx.post(f"{url}/-/faults", json={"status": 500}, headers=AUTH).status_code == 200
    assert put(url, document(1)).status_code == 500
    httpx.post(f"{url}/-/faults", json={"reject": True}, headers=AUTH)
    assert put(url, document(1)).status_code == 422
    httpx.post(f"{url}/-/faults", json={}, headers=AUTH)
    assert put(url, document(1)).status_code == 200
    assert receiver.received == 3 and receiver.version == 1


def test_a_delay_fault_holds_the_answer_past_a_client_timeout(reference):
    receiver, url = reference
    receiver.faults = {"delay": 2}

    with pytest.raises(httpx.TimeoutException):
        httpx.put(f"{url}/v1/catalog", content=json.dumps(document(1)).encode(), headers=AUTH, timeout=0.3)


def test_the_applied_catalog_survives_a_restart_with_its_state_file(tmp_path):
    state = tmp_path / "gateway.json"
    first = ReferenceGateway(TOKEN, str(state))
    server, url = serve(first)
    try:
        assert put(url, document(4, "kept")).status_code == 200
    finally:
        server.shutdown()
        server.server_close()

    again = ReferenceGateway(TOKEN, str(state))
    server, url = serve(again)
    try:
        assert again.version == 4
        assert get(url).json() == document(4, "kept")
        assert put(url, document(3, "older")).json() == {"version": 4}
    finally:
        server.shutdown()
        server.server_close()


def test_manage_py_run_reference_gateway_serves_the_protocol_and_keeps_state(tmp_path):
    port = free_port()
    state = tmp_path / "state.json"
    command = [sys.executable, "manage.py", "run_reference_gateway", "--port", str(port), "--token", TOKEN,
               "--state-file", str(state)]
    process = subprocess.Popen(command, cwd=PROJECT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    def listening() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"the command exited: {process.stdout.read().decode()}")
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_until(listening, timeout=30, what="the reference gateway listens")
        banner = process.stdout.readline().decode()
        assert f"http://127.0.0.1:{port}" in banner, banner
        url = f"http://127.0.0.1:{port}"
        assert put(url, document(7, "x")).status_code == 200
        assert put(url, document(6, "x")).json() == {"version": 7}
        assert get(url).json()["version"] == 7
    finally:
        process.kill()
        process.wait(timeout=10)
    wait_until(state.exists, timeout=5, what="the state file is written")
    assert json.loads(state.read_text())["version"] == 7


def test_manage_py_run_reference_gateway_refuses_a_short_token():
    result = subprocess.run([sys.executable, "manage.py", "run_reference_gateway", "--port", str(free_port()),
                             "--token", "short"], cwd=PROJECT, capture_output=True, text=True, timeout=60)

    assert result.returncode != 0 and "token" in result.stderr
