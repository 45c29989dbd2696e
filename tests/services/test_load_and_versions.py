"""Loading stored rows (a bad one is skipped, listed, never fatal), catalog
versions, audit events, and the first start's settings import."""

from __future__ import annotations

import json

import pytest
import yaml

from catalog import selectors
from catalog.builder import CatalogError
from catalog.models import AuditEvent, CatalogVersion, SettingsVersion, StoredModel
from catalog.services import models as svc
from catalog.services.settings import import_initial_settings

pytestmark = pytest.mark.django_db


SOURCE = "hf://acme/chat-7b"


def model(name: str, **fields) -> dict:
    return {"name": name, "source": SOURCE, **fields}


def add(name: str, **fields) -> dict:
    return svc.add_model(definition=model(name, **fields), by="alice")


def store_row(name: str, definition) -> None:
    """A row as it might be found in the database: written around the service."""
    text = definition if isinstance(definition, str) else json.dumps(definition)
    StoredModel.objects.create(name=name, definition=text, created_by="legacy", updated_by="legacy")


def skipped() -> dict[str, str]:
    return {s.name: s.reason for s in selectors.in_force().catalog.skipped}


# --- load ---------------------------------------------------------------------

def test_a_row_that_is_not_json_is_skipped_and_listed_not_fatal(viewer_api):
    add("acme/good")
    store_row("acme/broken", "{not json")
    state = selectors.in_force()
    assert "acme/broken" in skipped() and "JSON" in skipped()["acme/broken"]
    assert state.catalog.resolve("acme/good") is not None
    assert state.catalog.resolve("declared/llama") is not None
    response = viewer_api.get("/api/v1/skipped")
    assert response.status_code == 200
    listed = {row["name"]: row for row in response.json()["results"]}
    assert listed["acme/broken"]["kind"] == "runtime" and "JSON" in listed["acme/broken"]["reason"]


def test_a_bad_row_does_not_block_another_models_operations():
    add("acme/good")
    store_row("acme/broken", "[1, 2")
    store_row("acme/orphan", model("acme/orphan", fallbacks=["acme/later"]))
    assert svc.scale_model(name="acme/good", min=0, max=3, by="alice")["scaling"] == {"min": 0, "max": 3}
    assert add("acme/other", fallbacks=["acme/good"])["fallbacks"] == ["acme/good"]
    svc.remove_model(name="acme/other", by="alice")
    assert set(skipped()) == {"acme/broken", "acme/orphan"}


def test_a_row_whose_fallback_is_missing_is_skipped_with_those_that_reach_it():
    store_row("acme/orphan", model("acme/orphan", fallbacks=["acme/later"]))
    store_row("acme/leaning", model("acme/leaning", canary={"model": "acme/orphan", "percent": 5}))
    reasons = skipped()
    assert "fallbacks.0" in reasons["acme/orphan"] and "acme/later" in reasons["acme/orphan"]
    assert "acme/orphan" in reasons["acme/leaning"]


def test_adding_the_missing_fallback_heals_the_skipped_rows():
    store_row("acme/orphan", model("acme/orphan", fallbacks=["acme/later"]))
    store_row("acme/leaning", model("acme/leaning", fallbacks=["acme/orphan"]))
    assert set(skipped()) == {"acme/orphan", "acme/leaning"}
    add("acme/later")
    state = selectors.in_force()
    assert state.catalog.skipped == []
    assert state.catalog.resolve("acme/orphan")["fallbacks"] == ["acme/later"]
    assert state.catalog.used_by("acme/orphan")["fallback_of"] == ["acme/leaning"]
    latest = CatalogVersion.objects.order_by("-version").first()
    assert {"acme/orphan", "acme/leaning", "acme/later"} <= {m["name"] for m in json.loads(latest.document)}


def test_load_does_not_depend_on_row_order():
    # Written in an order where the referrer comes first, by name and by id.
    store_row("acme/a-first", model("acme/a-first", fallbacks=["acme/z-last"]))
    store_row("acme/z-last", model("acme/z-last", canary={"model": "acme/m-middle", "percent": 5}))
    store_row("acme/m-middle", model("acme/m-middle"))
    state = selectors.in_force()
    assert state.catalog.skipped == []
    assert {"acme/a-first", "acme/z-last", "acme/m-middle"} <= {m["name"] for m in state.catalog.models()}


def test_a_row_taking_a_declared_name_is_skipped_and_the_declared_model_wins():
    store_row("declared-cpu", model("declared-cpu"))
    assert "declared" in skipped()["declared-cpu"]
    assert selectors.in_force().catalog.resolve("declared-cpu")["engine"] == "llama.cpp"


def test_a_row_that_stopped_validating_can_be_replaced_whole():
    store_row("acme/stale", model("acme/stale", engine="tgi"))
    assert "engine" in skipped()["acme/stale"]
    built = add("acme/stale")
    assert built["engine"] == "vllm" and skipped() == {}


def test_a_row_that_does_not_decode_can_be_removed():
    store_row("acme/broken", "{")
    svc.remove_model(name="acme/broken", by="alice")
    assert skipped() == {} and not StoredModel.objects.filter(name="acme/broken").exists()


# --- versions -----------------------------------------------------------------

def test_each_change_records_a_version_whose_digest_is_the_catalog_in_force():
    add("acme/a")
    first = CatalogVersion.objects.order_by("-version").first()
    svc.scale_model(name="acme/a", min=0, max=1, by="alice")
    second = CatalogVersion.objects.order_by("-version").first()
    assert second.version == first.version + 1
    assert second.digest == selectors.in_force().catalog.digest != first.digest
    assert second.created_by == "alice" and "acme/a" in second.reason
    assert second.settings_version == selectors.in_force().settings.version == 1


def test_a_change_that_leaves_the_catalog_as_it_was_records_no_version():
    add("acme/a", scaling={"min": 1, "max": 3})
    versions = CatalogVersion.objects.count()
    svc.scale_model(name="acme/a", min=1, max=3, by="alice")
    svc.set_owner(name="acme/a", owner="", by="alice")  # "" is the default
    assert CatalogVersion.objects.count() == versions


def test_a_refused_change_records_no_version_and_no_audit_event():
    add("acme/a")
    versions, events = CatalogVersion.objects.count(), AuditEvent.objects.count()
    with pytest.raises(CatalogError):
        svc.set_fallbacks(name="acme/a", fallbacks=["acme/a"], by="alice")
    assert (CatalogVersion.objects.count(), AuditEvent.objects.count()) == (versions, events)


def test_the_row_the_version_and_the_audit_event_commit_together_or_not_at_all(monkeypatch):
    from catalog.services import audit

    add("acme/a")
    before = (list(StoredModel.objects.values_list("name", "definition")), CatalogVersion.objects.count(),
              AuditEvent.objects.count())

    def audit_fails(**kwargs):
        raise RuntimeError("audit table unavailable")

    monkeypatch.setattr(audit, "record", audit_fails)
    with pytest.raises(RuntimeError):
        svc.scale_model(name="acme/a", min=0, max=7, by="alice")
    with pytest.raises(RuntimeError):
        add("acme/b")
    after = (list(StoredModel.objects.values_list("name", "definition")), CatalogVersion.objects.count(),
             AuditEvent.objects.count())
    assert after == before
    assert selectors.in_force().catalog.resolve("acme/a")["scaling"] == {"min": 1, "max": 2}


def test_a_change_made_by_a_machine_whose_clock_is_behind_is_still_in_force(monkeypatch):
    # Web workers, the Celery worker and commands run on several machines;
    # their clocks disagree by seconds. The catalog cached in each process
    # must follow the rows, not the writers' clocks.
    from datetime import timedelta

    from django.utils import timezone

    add("acme/a")
    add("acme/b")
    assert selectors.in_force().catalog.resolve("acme/a")["scaling"]["max"] == 2
    real_now = timezone.now
    with monkeypatch.context() as elsewhere:
        # The write happens on the other machine: this process keeps what it read.
        elsewhere.setattr(svc, "remember_in_force", lambda state: None)
        elsewhere.setattr(timezone, "now", lambda: real_now() - timedelta(minutes=1))
        svc.scale_model(name="acme/a", min=1, max=9, by="alice")
    assert selectors.in_force().catalog.resolve("acme/a")["scaling"]["max"] == 9
    assert selectors.in_force().catalog.digest == CatalogVersion.objects.order_by("-version").first().digest


def test_versions_strictly_increase_and_each_names_a_different_catalog():
    add("acme/a")
    add("acme/b", fallbacks=["acme/a"])
    svc.set_class(name="acme/b", cls="critical", by="alice")
    svc.set_fallbacks(name="acme/b", fallbacks=[], by="alice")
    svc.remove_model(name="acme/a", by="alice")
    rows = list(CatalogVersion.objects.order_by("id").values_list("version", "digest"))
    numbers = [n for n, _ in rows]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers) == 6  # import + 5 changes
    assert all(a[1] != b[1] for a, b in zip(rows, rows[1:]))


def test_every_write_is_audited_with_actor_action_object_and_before_after():
    add("acme/a", owner="team:a")
    svc.set_owner(name="acme/a", owner="team:b", by="bob")
    svc.remove_model(name="acme/a", by="carol")
    events = list(AuditEvent.objects.filter(object_type="model", object_id="acme/a").order_by("id"))
    assert [(e.actor, e.action) for e in events] == [
        ("alice", "model.add"), ("bob", "model.set_owner"), ("carol", "model.remove")]
    added, owned, removed = events
    assert added.before is None and added.after["owner"] == "team:a"
    assert owned.before["owner"] == "team:a" and owned.after["owner"] == "team:b"
    assert removed.before["owner"] == "team:b" and removed.after is None


def test_an_api_write_carries_the_request_id_into_its_audit_event(operator_api):
    response = operator_api.post("/api/v1/models", model("acme/a"), format="json",
                                 HTTP_X_REQUEST_ID="req-0123456789abcdef")
    assert response.status_code == 201, response.json()
    assert response["X-Request-Id"] == "req-0123456789abcdef"
    event = AuditEvent.objects.get(object_id="acme/a")
    assert (event.actor, event.request_id) == ("operator-user", "req-0123456789abcdef")


def test_an_api_write_without_a_request_id_gets_one_shared_by_response_and_audit(operator_api):
    response = operator_api.post("/api/v1/models", model("acme/a"), format="json")
    assert response.status_code == 201
    assert response["X-Request-Id"]
    assert AuditEvent.objects.get(object_id="acme/a").request_id == response["X-Request-Id"]


def test_a_request_id_that_does_not_look_like_one_is_replaced(operator_api):
    response = operator_api.post("/api/v1/models", model("acme/a"), format="json",
                                 HTTP_X_REQUEST_ID="<script>alert(1)</script>")
    assert response["X-Request-Id"] != "<script>alert(1)</script>"
    assert AuditEvent.objects.get(object_id="acme/a").request_id == response["X-Request-Id"]


# --- first start --------------------------------------------------------------

def test_first_start_imports_the_cluster_keys_as_version_1_with_the_baseline_guard(settings_file):
    document = yaml.safe_load(settings_file.path.read_text())
    settings_file.write({**document, "tls": {"cert": "/etc/tls.pem"}, "log": {"level": "info"}})
    state = selectors.in_force()
    v1 = SettingsVersion.objects.get()
    assert v1.number == 1 and state.settings.version == 1
    assert v1.document["guard"] == {"policy": "baseline"}
    assert not {"listen", "node_name", "tls", "log"} & set(v1.document)
    assert {k: v for k, v in v1.document.items() if k != "guard"} == {
        k: v for k, v in document.items() if k not in ("listen", "node_name")}
    assert AuditEvent.objects.filter(action="settings.import").count() == 1
    assert CatalogVersion.objects.get().settings_version == 1


def test_first_start_keeps_a_guard_policy_the_file_sets(settings_file):
    document = yaml.safe_load(settings_file.path.read_text())
    settings_file.write({**document, "guard": {"policy": "strict"}})
    selectors.in_force()
    assert SettingsVersion.objects.get().document["guard"] == {"policy": "strict"}


def test_the_import_happens_once_and_later_file_changes_are_ignored(settings_file):
    selectors.in_force()
    assert import_initial_settings() is None
    document = yaml.safe_load(settings_file.path.read_text())
    settings_file.write({**document, "models": []})
    selectors.clear_cache()
    assert SettingsVersion.objects.count() == 1
    assert selectors.in_force().catalog.resolve("declared/llama") is not None
    assert AuditEvent.objects.filter(action="settings.import").count() == 1
