"""``manage.py gateways`` against reference gateways in threads, and the
demo gateway that ``manage.py demo`` registers.

Deliveries run inline when the registering or pushing transaction commits;
the tests that print a delivery's outcome use ``transactional_db`` so the
commit happens inside the command, as it does from a shell.
"""

import json
import re
import socket

import pytest

from catalog import secrets, selectors
from catalog.models import AuditEvent, Gateway
from catalog.reference_gateway import ReferenceGateway
from catalog.services import gateways as gateway_services
from catalog.services import models as model_services

TOKEN = "gateway-token-0123456789"


@pytest.fixture
def catalog(db):
    """Settings imported, so catalog version 1 exists."""
    selectors.in_force()
    return selectors.latest_catalog_version()


@pytest.fixture
def receiver():
    """``receiver(port=0)``: a reference gateway serving in a thread; (gateway, url)."""
    servers = []

    def start(port: int = 0, token: str = TOKEN):
        gateway = ReferenceGateway(token)
        server, url = gateway.start(port=port)
        servers.append(server)
        return gateway, url

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def register(name: str, url: str, token: str = TOKEN, enabled: bool = True) -> Gateway:
    return gateway_services.register_gateway(name=name, url=url, token=token, enabled=enabled, by="tests")


# --- list -------------------------------------------------------------------------

def test_list_says_how_to_add_one_when_there_are_none(run, catalog):
    assert "manage.py gateways add" in run("gateways", "list")
    assert run.json("gateways", "list") == []


def test_list_shows_state_and_acked_version_against_the_newest(run, catalog):
    Gateway.objects.create(name="gw-old", url="http://10.0.0.1:9000", token_encrypted=secrets.encrypt(TOKEN),
                           token_hash=secrets.fingerprint(TOKEN), acked_version=1)
    model_services.add_model(definition={"name": "team/chat", "source": "hf://org/chat"}, by="tests")
    Gateway.objects.create(name="gw-off", url="http://10.0.0.2:9000", token_encrypted=secrets.encrypt("x" * 20),
                           token_hash=secrets.fingerprint("x" * 20), enabled=False, failures=2,
                           last_error="version 2: connection refused")

    lines = run("gateways", "list").splitlines()
    items = {i["name"]: i for i in run.json("gateways", "list")}

    assert lines[0].split() == ["NAME", "URL", "ENABLED", "STATE", "ACKED", "LAST", "SEEN", "LAST", "ERROR"]
    assert lines[1].split() == ["gw-off", "http://10.0.0.2:9000", "no", "failing", "-/2", "never", "version", "2:",
                                "connection", "refused"]
    assert lines[2].split() == ["gw-old", "http://10.0.0.1:9000", "yes", "behind", "1/2", "never", "-"]
    assert (items["gw-old"]["acked_version"], items["gw-old"]["current_version"]) == (1, 2)
    assert items["gw-off"]["last_error"] == "version 2: connection refused"


# --- add --------------------------------------------------------------------------

def test_add_reads_the_token_from_the_environment_and_delivers_before_returning(run, transactional_db, receiver,
                                                                                monkeypatch):
    selectors.in_force()
    gateway, url = receiver()
    monkeypatch.setenv("GW_TOKEN", TOKEN)

    printed = run("gateways", "add", "edge-1", url, "--token-from-env", "GW_TOKEN", "--as", "ops")

    latest = selectors.latest_catalog_version()
    assert printed.strip() == f"registered gateway edge-1 at {url}: in_sync, acked version {latest.version} " \
                              f"of {latest.version}"
    assert gateway.version == latest.version
    assert run.stderr == ""
    assert AuditEvent.objects.filter(action="gateway.add", object_id="edge-1", actor="ops").exists()
    listed = run.json("gateways", "list")
    assert [(i["name"], i["state"], i["enabled"]) for i in listed] == [("edge-1", "in_sync", True)]
    assert TOKEN not in json.dumps(listed) + printed


def test_add_with_a_token_on_the_command_line_warns_about_shell_history(run, catalog):
    item = run.json("gateways", "add", "edge-1", "http://127.0.0.1:9", "--token", TOKEN)

    assert item["name"] == "edge-1"
    assert "shell history" in run.stderr and "--token-from-env" in run.stderr
    assert Gateway.objects.get(name="edge-1").token_hash == secrets.fingerprint(TOKEN)


@pytest.mark.parametrize("args, env, expected", [
    (["edge-1", "http://127.0.0.1:9"], {}, "refused: token: give the gateway's token with --token-from-env VAR"),
    (["edge-1", "http://127.0.0.1:9", "--token-from-env", "GW_UNSET"], {}, "GW_UNSET is not set"),
    (["edge-1", "http://127.0.0.1:9", "--token-from-env", "GW_TOKEN", "--token", TOKEN], {"GW_TOKEN": TOKEN},
     "not both"),
    (["edge-1", "ftp://somewhere", "--token-from-env", "GW_TOKEN"], {"GW_TOKEN": TOKEN}, "refused: url: "),
    (["edge-1", "http://127.0.0.1:9", "--token-from-env", "GW_TOKEN"], {"GW_TOKEN": "short"}, "refused: token: "),
    (["Edge 1", "http://127.0.0.1:9", "--token-from-env", "GW_TOKEN"], {"GW_TOKEN": TOKEN}, "refused: name: "),
])
def test_add_refusals_are_one_line_and_register_nothing(run, catalog, monkeypatch, args, env, expected):
    monkeypatch.delenv("GW_UNSET", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)

    assert expected in run.refused("gateways", "add", *args)
    assert not Gateway.objects.exists()


def test_add_refuses_a_name_or_token_already_registered(run, catalog, monkeypatch):
    register("edge-1", "http://127.0.0.1:9")
    monkeypatch.setenv("GW_TOKEN", TOKEN)
    monkeypatch.setenv("OTHER_TOKEN", "another-token-0123456789")

    assert "registered already" in run.refused("gateways", "add", "edge-1", "http://127.0.0.1:9",
                                               "--token-from-env", "OTHER_TOKEN")
    assert "its own" in run.refused("gateways", "add", "edge-2", "http://127.0.0.1:9", "--token-from-env", "GW_TOKEN")
    assert Gateway.objects.count() == 1


# --- push, enable, disable, remove ------------------------------------------------

def test_push_delivers_now_to_a_gateway_that_was_failing_and_prints_the_new_state(run, transactional_db, receiver):
    selectors.in_force()
    port = unused_port()
    url = f"http://127.0.0.1:{port}"
    register("edge-1", url)  # nothing listens yet: the first delivery fails
    assert run.json("gateways", "list")[0]["state"] == "failing"
    gateway, _ = receiver(port)

    printed = run("gateways", "push", "edge-1")

    latest = selectors.latest_catalog_version().version
    assert printed.strip() == f"pushed to edge-1: in_sync, acked version {latest} of {latest}"
    assert gateway.version == latest
    assert AuditEvent.objects.filter(action="gateway.push", object_id="edge-1").exists()


def test_push_json_is_the_gateway_after_the_delivery(run, transactional_db):
    selectors.in_force()
    register("edge-1", f"http://127.0.0.1:{unused_port()}")

    item = run.json("gateways", "push", "edge-1")

    assert item["state"] == "failing"
    assert "version 1" in item["last_error"]


def test_push_refuses_a_disabled_or_unknown_gateway(run, catalog):
    register("edge-1", "http://127.0.0.1:9", enabled=False)

    assert run.refused("gateways", "push", "edge-1") == "refused: gateway 'edge-1' is disabled; enable it first"
    assert run.refused("gateways", "push", "ghost") == "refused: no gateway 'ghost'"


def test_disable_then_enable_delivers_what_was_missed(run, transactional_db, receiver):
    selectors.in_force()
    gateway, url = receiver()
    register("edge-1", url)

    assert run("gateways", "disable", "edge-1").startswith("disabled edge-1: in_sync")
    model_services.add_model(definition={"name": "team/chat", "source": "hf://org/chat"}, by="tests")
    latest = selectors.latest_catalog_version().version
    assert gateway.version == latest - 1  # a disabled gateway is not published to
    assert run.json("gateways", "list")[0]["enabled"] is False

    printed = run("gateways", "enable", "edge-1")

    assert printed.strip() == f"enabled edge-1: in_sync, acked version {latest} of {latest}"
    assert gateway.version == latest


def test_enable_and_disable_refuse_an_unknown_gateway(run, catalog):
    assert run.refused("gateways", "enable", "ghost") == "refused: no gateway 'ghost'"
    assert run.refused("gateways", "disable", "ghost") == "refused: no gateway 'ghost'"


def test_remove_forgets_the_gateway(run, catalog):
    register("edge-1", "http://127.0.0.1:9")

    assert run("gateways", "remove", "edge-1", "--as", "ops").strip() == "removed gateway edge-1"
    assert not Gateway.objects.exists()
    assert AuditEvent.objects.filter(action="gateway.remove", object_id="edge-1", actor="ops").exists()
    assert run.refused("gateways", "remove", "edge-1") == "refused: no gateway 'edge-1'"


# --- the demo gateway -------------------------------------------------------------

COMMAND = re.compile(r"^  \.venv/bin/python manage\.py run_reference_gateway --port 8001 --token (\S+) "
                     r"--state-file var/demo-gateway\.json$", re.MULTILINE)


def test_demo_registers_its_gateway_and_prints_the_receiver_command_with_a_working_token(run, db):
    printed = run("demo")

    match = COMMAND.search(printed)
    assert match, printed
    token = match.group(1)
    assert printed.count(token) == 1  # only inside the command
    gateway = Gateway.objects.get(name="demo-gateway")
    assert gateway.url == "http://127.0.0.1:8001"
    assert gateway.token_hash == secrets.fingerprint(token)
    assert secrets.decrypt(gateway.token_encrypted) == token


def test_demo_again_gives_the_gateway_a_fresh_token_and_keeps_one_gateway(run, db):
    first = COMMAND.search(run("demo")).group(1)

    again = run.json("demo")

    second = re.search(r"--token (\S+)", again["reference_gateway_command"]).group(1)
    assert second != first
    assert again["reference_gateway_command"] == (f".venv/bin/python manage.py run_reference_gateway --port 8001 "
                                                  f"--token {second} --state-file var/demo-gateway.json")
    assert Gateway.objects.count() == 1
    assert Gateway.objects.get().token_hash == secrets.fingerprint(second)


def test_demo_ports_move_the_urls_and_the_gateway(run, db):
    again = run.json("demo", "--port", "8100", "--gateway-port", "8101")

    assert again["url"] == "http://127.0.0.1:8100/"
    assert again["gateway_url"] == "http://127.0.0.1:8101"
    assert "--port 8101 " in again["reference_gateway_command"]
    assert Gateway.objects.get(name="demo-gateway").url == "http://127.0.0.1:8101"


def test_the_demo_gateway_moved_to_another_port_gets_the_catalog_there(run, transactional_db, receiver):
    # `make run GATEWAY_PORT=...` after a run on the default port: a new
    # receiver, empty, at a new address. Until it has the catalog it is
    # not in sync, whatever the old address acknowledged.
    first_port = unused_port()
    second_port = next(p for p in iter(unused_port, None) if p != first_port)
    token = re.search(r"--token (\S+)", run.json("demo", "--gateway-port", str(first_port))
                      ["reference_gateway_command"]).group(1)
    old, _ = receiver(first_port, token)
    run("gateways", "push", "demo-gateway")
    latest = selectors.latest_catalog_version().version
    assert old.version == latest

    token = re.search(r"--token (\S+)", run.json("demo", "--gateway-port", str(second_port))
                      ["reference_gateway_command"]).group(1)
    new, _ = receiver(second_port, token)
    item = run.json("gateways", "push", "demo-gateway")

    assert new.version == latest
    assert item["state"] == "in_sync"
