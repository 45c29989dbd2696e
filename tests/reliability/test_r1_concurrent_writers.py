"""Drill R1 (QUALITY.md): eight writers at once on PostgreSQL.

Eight threads, each with its own database connection and its own operator
token, make fifty mixed writes each through the REST API, in process: adds
(some falling back to, or sending canary traffic to, other writers' models),
scaling, class, fallbacks, several fields at once, resources, deletes (some
refused because others depend on the model), and adds that must be refused.
Four shared models are changed by every writer, so the same row is fought
over too.

What must hold afterwards: no 5xx, every answer one the operation allows;
the catalog in force is the build of the database rows and is the newest
recorded version; versions strictly increase; every acknowledged write is
in the final state unless a later acknowledged write changed it; one audit
row per acknowledged write, none for a refused one.

Each request carries its own ``X-Request-Id``, which the audit row records,
so an acknowledged write and its audit row can be matched one to one.
"""

from __future__ import annotations

import json
import random
import threading
from dataclasses import dataclass

import pytest
from django.db import connection
from rest_framework.test import APIClient

from catalog import builder, selectors
from catalog.models import AuditEvent, CatalogVersion, StoredModel
from catalog.services.users import add_user, create_token

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

WRITERS = 8
OPERATIONS = 50
SHARED = [f"r1-shared/s{k}" for k in range(4)]
# Declared in tests/conftest.py's TEST_SETTINGS: always there, never removable.
DECLARED_TARGETS = ["llama", "declared-cpu"]
CLASS_VALUES = ["", "critical", "standard", "opportunistic"]


@dataclass
class Call:
    request_id: str
    writer: int
    op: str
    method: str
    path: str
    name: str | None
    body: object
    expected: frozenset
    status: int
    answer: object

    @property
    def acknowledged(self) -> bool:
        return self.method != "GET" and 200 <= self.status < 300

    def __repr__(self) -> str:  # what a failed assertion shows
        return (f"{self.request_id} {self.op}: {self.method} {self.path} {json.dumps(self.body)[:200]} "
                f"-> {self.status} (expected {sorted(self.expected)}) {json.dumps(self.answer)[:300]}")


class Registry:
    """Which models each writer believes exist, for others to refer to.

    Only ever a hint: a writer may pick a model its owner is deleting at that
    moment, and the add or change that names it is then refused with 400.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._alive: dict[str, int] = {}

    def added(self, name: str, writer: int) -> None:
        with self._lock:
            self._alive[name] = writer

    def removed(self, name: str) -> None:
        with self._lock:
            self._alive.pop(name, None)

    def others(self, writer: int) -> list[str]:
        with self._lock:
            return sorted(n for n, w in self._alive.items() if w != writer)


class Writer:
    def __init__(self, number: int, token: str, registry: Registry, barrier: threading.Barrier):
        self.number = number
        self.registry = registry
        self.barrier = barrier
        self.rng = random.Random(1000 + number)
        self.client = APIClient()
        # A 500 is an answer to record and report with its request, not an
        # exception that ends the writer.
        self.client.raise_request_exception = False
        self.client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        self.calls: list[Call] = []
        self.alive: list[str] = []  # this writer's models that exist: only it deletes them
        self.next_index = 0
        self.error: BaseException | None = None

    # --- plumbing --------------------------------------------------------

    def call(self, op: str, method: str, path: str, body=None, *, name=None, expected) -> Call:
        request_id = f"r1-w{self.number}-{len(self.calls):03d}"
        kwargs = {"HTTP_X_REQUEST_ID": request_id}
        if body is not None:
            kwargs.update(data=json.dumps(body), content_type="application/json")
        response = getattr(self.client, method.lower())(path, **kwargs)
        try:
            answer = response.json() if response.content else None
        except ValueError:
            answer = response.content[:300].decode("utf-8", "replace")
        call = Call(request_id, self.number, op, method, path, name, body, frozenset(expected),
                    response.status_code, answer)
        self.calls.append(call)
        return call

    def run(self) -> None:
        try:
            self.barrier.wait(timeout=30)
            for _ in range(OPERATIONS):
                self.step()
        except BaseException as exc:  # reported by the test, not lost with the thread
            self.error = exc
        finally:
            # Each thread has its own connection; left open it would outlive
            # the test and block the test database's flush.
            connection.close()

    # --- choosing what to refer to ---------------------------------------

    def own_name(self) -> str:
        self.next_index += 1
        return f"r1-w{self.number}/m{self.next_index}"

    def reference(self) -> tuple[str, bool]:
        """A model to fall back to or canary: (name, may it vanish meanwhile)."""
        pool = self.rng.choice(["own", "own", "declared", "other", "other"])
        if pool == "other" and self.registry.others(self.number):
            return self.rng.choice(self.registry.others(self.number)), True
        if pool == "own" and self.alive:
            return self.rng.choice(self.alive), False
        return self.rng.choice(DECLARED_TARGETS), False

    # --- one operation ---------------------------------------------------

    def step(self) -> None:
        if len(self.alive) < 2:
            return self.add()
        op = self.rng.choices(
            [self.add, self.scale, self.set_class, self.set_fallbacks, self.patch_several,
             self.resources, self.delete, self.invalid, self.shared, self.read],
            weights=[20, 12, 8, 10, 10, 5, 15, 10, 6, 4],
        )[0]
        op()

    def add(self) -> None:
        name = self.own_name()
        definition = {"name": name, "source": f"hf://r1-org/w{self.number}-{self.next_index}",
                      "description": f"added by writer {self.number}"}
        may_vanish = False
        if self.rng.random() < 0.6:
            target, vanish = self.reference()
            definition["fallbacks"] = [target]
            may_vanish |= vanish
        if self.rng.random() < 0.3:
            target, vanish = self.reference()
            definition["canary"] = {"model": target, "percent": self.rng.randint(1, 99)}
            may_vanish |= vanish
        # A model nobody refers to yet cannot close a cycle: only a target
        # deleted meanwhile can make this add fail.
        call = self.call("add", "POST", "/api/v1/models", definition, name=name,
                         expected={201, 400} if may_vanish else {201})
        if call.status == 201:
            self.alive.append(name)
            self.registry.added(name, self.number)

    def scale(self) -> None:
        name = self.rng.choice(self.alive)
        low = self.rng.randint(0, 3)
        self.call("scale", "PATCH", f"/api/v1/models/{name}",
                  {"scaling": {"min": low, "max": low + self.rng.randint(0 if low else 1, 3)}},
                  name=name, expected={200})

    def set_class(self) -> None:
        name = self.rng.choice(self.alive)
        self.call("set_class", "PATCH", f"/api/v1/models/{name}", {"class": self.rng.choice(CLASS_VALUES)},
                  name=name, expected={200})

    def set_fallbacks(self) -> None:
        name = self.rng.choice(self.alive)
        targets = []
        for _ in range(self.rng.randint(0, 3)):
            target, _vanish = self.reference()
            if target != name and target not in targets:
                targets.append(target)
        # 400 when a target was deleted meanwhile or the chain closes a cycle.
        self.call("set_fallbacks", "PATCH", f"/api/v1/models/{name}", {"fallbacks": targets},
                  name=name, expected={200, 400})

    def patch_several(self) -> None:
        name = self.rng.choice(self.alive)
        low = self.rng.randint(0, 2)
        changes = {
            "scaling": {"min": low, "max": low + 1},
            "class": self.rng.choice(CLASS_VALUES),
            "owner": f"team:w{self.number}",
            "eval": self.rng.choice([None, {"suite": "r1-suite", "min_score": 0.5}]),
        }
        self.call("patch_several", "PATCH", f"/api/v1/models/{name}", changes, name=name, expected={200})

    def resources(self) -> None:
        name = self.rng.choice(self.alive)
        self.call("resources", "POST", f"/api/v1/models/{name}/-/resources",
                  {"min_memory_gb": self.rng.randint(0, 64), "cpu_cores": self.rng.randint(0, 16)},
                  name=name, expected={200})

    def delete(self) -> None:
        name = self.rng.choice(self.alive)
        # 409 while another model (anyone's) falls back to it or canaries it.
        call = self.call("delete", "DELETE", f"/api/v1/models/{name}", name=name, expected={204, 409})
        if call.status == 204:
            self.alive.remove(name)
            self.registry.removed(name)

    def invalid(self) -> None:
        bad = f"r1-w{self.number}/bad{len(self.calls)}"
        source = "hf://r1-org/bad"
        method, path, body, expected = self.rng.choice([
            ("POST", "/api/v1/models", {"name": f"r1-w{self.number}/../up", "source": source}, {400}),
            ("POST", "/api/v1/models", {"name": bad}, {400}),
            ("POST", "/api/v1/models", {"name": bad, "source": source, "scaling": {"min": 3, "max": 1}}, {400}),
            ("POST", "/api/v1/models", {"name": bad, "source": source, "fallbacks": [bad]}, {400}),
            ("POST", "/api/v1/models", {"name": bad, "source": source, "fallbacks": ["r1-nowhere"]}, {400}),
            ("POST", "/api/v1/models", {"name": bad, "source": source, "colour": "red"}, {400}),
            ("POST", "/api/v1/models", {"name": bad, "source": source, "aliases": ["llama"]}, {400}),
            ("POST", "/api/v1/models", {"name": bad, "source": source,
                                        "canary": {"model": "llama", "percent": 100}}, {400}),
            ("POST", "/api/v1/models", {"name": bad, "source": source,
                                        "profiles": [{"name": "cpu", "gpus": 0}]}, {400}),
            ("POST", "/api/v1/models", [bad], {400}),
            ("POST", "/api/v1/models", {"name": "declared-cpu", "source": source}, {409}),
            ("DELETE", "/api/v1/models/declared-cpu", None, {409}),
            ("PATCH", f"/api/v1/models/{bad}", {"class": "critical"}, {404}),
            ("PATCH", f"/api/v1/models/{self.rng.choice(self.alive)}", {"class": "urgent"}, {400}),
        ])
        self.call("invalid", method, path, body, expected=expected)

    def shared(self) -> None:
        name = self.rng.choice(SHARED)
        self.call("shared", "PATCH", f"/api/v1/models/{name}",
                  {"class": self.rng.choice(CLASS_VALUES), "owner": f"team:w{self.number}"},
                  name=name, expected={200})

    def read(self) -> None:
        name = self.rng.choice(self.alive)
        self.call("read", "GET", f"/api/v1/models/{name}", name=name, expected={200})


def _stored() -> dict[str, dict]:
    return {name: json.loads(text) for name, text in StoredModel.objects.values_list("name", "definition")}


@pytest.fixture
def writers(transactional_db):
    """Eight writers, each with its own operator token, after the settings
    import and the shared models are in place (committed: the threads have
    connections of their own)."""
    selectors.in_force()  # imports the settings file as v1 before anyone races for it
    add_user(username="r1-operator", role="operator", password=None, by="tests")
    setup = APIClient()
    setup.credentials(HTTP_AUTHORIZATION=f"Bearer {create_token(username='r1-operator', by='tests')}")
    for k, name in enumerate(SHARED):
        response = setup.post("/api/v1/models", {"name": name, "source": f"hf://r1-org/shared-{k}"},
                              format="json", HTTP_X_REQUEST_ID=f"r1-setup-{k:03d}")
        assert response.status_code == 201, response.content
    registry = Registry()
    barrier = threading.Barrier(WRITERS)
    return [Writer(n, create_token(username="r1-operator", name=f"w{n}", by="tests"), registry, barrier)
            for n in range(WRITERS)]


def test_concurrent_writers_leave_the_catalog_equal_to_the_database(writers):
    threads = [threading.Thread(target=w.run, name=f"r1-writer-{w.number}") for w in writers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not [t.name for t in threads if t.is_alive()], "a writer hung"
    assert not [(w.number, repr(w.error)) for w in writers if w.error], "a writer raised"

    calls = [c for w in writers for c in w.calls]
    assert len(calls) == WRITERS * OPERATIONS

    # No server error, and every answer one the operation allows.
    assert [c for c in calls if c.status >= 500] == []
    assert [c for c in calls if c.status not in c.expected] == []
    # The drill exercised what it is about, not only the happy path.
    statuses = {(c.op, c.status) for c in calls}
    assert {("delete", 204), ("delete", 409), ("invalid", 400), ("add", 201)} <= statuses

    # What the console serves now (cache as the requests left it), and what
    # a fresh process would build from the rows.
    served = selectors.in_force()
    selectors.clear_cache()
    state = selectors.in_force()
    rebuilt = builder.load(state.settings.declared, state.federated, selectors.stored_rows(),
                           engines=state.settings.engines, defaults=state.settings.defaults)
    assert rebuilt.skipped == [], "an acknowledged write left a row that does not load"
    assert state.catalog.digest == rebuilt.digest
    assert served.catalog.digest == rebuilt.digest, "the cached catalog in force is stale"

    # Versions: strictly increasing in the order they were written, each a
    # change, the newest one the catalog in force.
    versions = list(CatalogVersion.objects.order_by("id").values_list("version", "digest"))
    numbers = [v for v, _ in versions]
    assert numbers == sorted(set(numbers)), "version numbers repeat or go backwards"
    assert all(a[1] != b[1] for a, b in zip(versions, versions[1:])), "a version recorded no change"
    newest = CatalogVersion.objects.order_by("-version").first()
    assert newest.digest == state.catalog.digest
    assert newest.document == state.catalog.document().body.decode("utf-8")

    # One audit row per acknowledged write, none for a refused one.
    acknowledged = [c for c in calls if c.acknowledged]
    audit = list(AuditEvent.objects.filter(object_type="model").order_by("id"))
    audited = [e.request_id for e in audit if not e.request_id.startswith("r1-setup-")]
    assert sorted(audited) == sorted(c.request_id for c in acknowledged)

    # Every acknowledged write is visible unless a later acknowledged write
    # of the same model changed it: the row is the newest audit row's after.
    stored = _stored()
    newest_audit: dict[str, AuditEvent] = {}
    for event in audit:
        newest_audit[event.object_id] = event
    for name, event in newest_audit.items():
        assert stored.get(name) == event.after, f"{name}: the database disagrees with its last acknowledged write"
    assert set(stored) == {n for n, e in newest_audit.items() if e.after is not None}

    # The writers' own view: what each added and did not delete is there,
    # with the scaling it last set (only a model's writer scales it).
    for w in writers:
        for name in w.alive:
            assert state.catalog.resolve(name) is not None, f"{name} was added and never deleted, but is gone"
        gone = {c.name for c in w.calls if c.op == "delete" and c.status == 204} - set(w.alive)
        assert not [n for n in gone if n in stored], "a deleted model came back"
        last_scaling = {}
        for c in w.calls:
            if c.acknowledged and isinstance(c.body, dict) and "scaling" in c.body and c.op != "add":
                last_scaling[c.name] = c.body["scaling"]
        for name, scaling in last_scaling.items():
            if name in w.alive:
                assert stored[name]["scaling"] == scaling
                assert state.catalog.resolve(name)["scaling"] == scaling
