"""Compare-and-set under concurrent writers, on PostgreSQL (issue #3).

Two admins who read the same version and write at the same moment: exactly
one write lands, the other is told 409, and nothing is lost — the winner's
document is the newest version and the version numbers have no gap. Each
thread has its own database connection, as two web workers would.
"""

from __future__ import annotations

import copy
import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from catalog import selectors
from catalog.models import AuditEvent, CatalogVersion, SettingsVersion
from catalog.services.users import add_user, create_token

pytestmark = pytest.mark.postgres

ROUNDS = 4


@pytest.fixture
def admins(transactional_db):
    """Two admin clients, after the first start's import (committed: the
    threads read it through connections of their own)."""
    add_user(username="race-admin", role="admin", password=None, by="tests")
    clients = []
    for n in range(2):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {create_token(username='race-admin', name=f'c{n}', by='tests')}")
        clients.append(client)
    return clients


def race(calls) -> list:
    """Run each call in its own thread, released together; their answers."""
    barrier = threading.Barrier(len(calls))
    answers: list = [None] * len(calls)

    def run(i, call):
        try:
            barrier.wait(timeout=30)
            answers[i] = call()
        except BaseException as exc:  # reported by the test, not lost with the thread
            answers[i] = exc
        finally:
            connection.close()  # a thread's connection would outlive the test and block the flush

    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a writer hung"
    assert not [a for a in answers if isinstance(a, BaseException)], answers
    return answers


def test_two_writers_based_on_the_same_version_one_wins_one_gets_409_nothing_lost(admins):
    selectors.settings_in_force()  # the import, before anyone races for it
    for round_ in range(ROUNDS):
        base = SettingsVersion.objects.order_by("-number").first()
        documents = []
        for n in range(2):
            document = copy.deepcopy(base.document)
            document["defaults"]["scaling"]["max"] = 10 * (round_ + 1) + n
            documents.append(document)
        answers = race([
            lambda api=api, document=document, n=n: api.put(
                "/api/v1/settings", {"document": document, "base_version": base.number, "comment": f"w{n}"},
                format="json")
            for n, (api, document) in enumerate(zip(admins, documents))])
        statuses = sorted(a.status_code for a in answers)
        assert statuses == [200, 409], [a.content for a in answers]
        winner = next(i for i, a in enumerate(answers) if a.status_code == 200)
        newest = SettingsVersion.objects.order_by("-number").first()
        assert newest.number == base.number + 1 == answers[winner].json()["version"]
        assert newest.document == documents[winner] and newest.parent == base.number
        assert newest.comment == f"w{winner}"

    numbers = list(SettingsVersion.objects.order_by("number").values_list("number", flat=True))
    assert numbers == list(range(1, ROUNDS + 2))
    assert AuditEvent.objects.filter(action="settings.replace").count() == ROUNDS
    assert CatalogVersion.objects.order_by("-version").first().settings_version == ROUNDS + 1
    selectors.clear_cache()
    state = selectors.in_force()
    assert state.settings.version == ROUNDS + 1
    assert state.catalog.resolve("declared-cpu")["scaling"]["max"] == newest.document["defaults"]["scaling"]["max"]


def test_two_key_writers_based_on_the_same_version_one_wins_and_the_other_is_not_applied(admins):
    selectors.settings_in_force()
    answers = race([
        lambda: admins[0].put("/api/v1/settings/keys/guard.policy", {"value": "strict", "base_version": 1},
                              format="json"),
        lambda: admins[1].put("/api/v1/settings/keys/cluster_name", {"value": "prod", "base_version": 1},
                              format="json"),
    ])
    assert sorted(a.status_code for a in answers) == [200, 409], [a.content for a in answers]
    newest = SettingsVersion.objects.order_by("-number").first()
    assert newest.number == 2 and SettingsVersion.objects.count() == 2
    if answers[0].status_code == 200:
        assert (newest.document["guard"], newest.document["cluster_name"]) == ({"policy": "strict"}, "test")
    else:
        assert (newest.document["guard"], newest.document["cluster_name"]) == ({"policy": "baseline"}, "prod")


def test_two_processes_starting_on_an_empty_store_import_the_file_once(admins):
    answers = race([lambda api=api: api.get("/api/v1/settings") for api in admins])
    assert [a.status_code for a in answers] == [200, 200], [a.content for a in answers]
    assert [a.json()["version"] for a in answers] == [1, 1]
    assert SettingsVersion.objects.count() == 1
    assert AuditEvent.objects.filter(action="settings.import").count() == 1
    assert CatalogVersion.objects.count() == 1
