"""Django admin for support staff (SPEC §7): every record readable, runtime
model edits through the service with the builder's validation, history and
audit read-only, secrets never shown."""

from __future__ import annotations

import html
import json

import pytest
from django.test import Client

from catalog import selectors
from catalog.models import AuditEvent, CatalogVersion, Gateway, PeerOffer, SettingsVersion, StoredModel
from catalog.services import gateways as gateway_services
from catalog.services import models as model_services
from catalog.services import settings as settings_services
from catalog.services import users as user_services

pytestmark = pytest.mark.django_db


def text(response) -> str:
    return html.unescape(response.content.decode())

GATEWAY_TOKEN = "gw-secret-0123456789abcdef"
PEER_TOKEN = "east-secret-token-value"


@pytest.fixture
def staff(admin_user) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client



def add(name: str, **fields) -> dict:
    return model_services.add_model(definition={"name": name, "source": f"hf://acme/{name.split('/')[-1]}", **fields},
                                    by="alice")


def change_url(model) -> str:
    return f"/admin/catalog/storedmodel/{StoredModel.objects.get(name=model).pk}/change/"


def test_every_record_is_listed_and_readable(staff, admin_user):
    add("rt/chat")
    gateway_services.register_gateway(name="edge-1", url="http://edge-1.example", token=GATEWAY_TOKEN, by="tests")
    PeerOffer.objects.create(peer="east", offered=[{"name": "chat"}])
    user_services.create_token(username=admin_user.username, name="ci", by="tests")
    for model in ("storedmodel", "settingsversion", "catalogversion", "auditevent", "apitoken", "gateway",
                  "peeroffer"):
        listing = staff.get(f"/admin/catalog/{model}/")
        assert listing.status_code == 200, model
        first = listing.context["cl"].result_list[0]
        assert staff.get(f"/admin/catalog/{model}/{first.pk}/change/").status_code == 200, model


def test_a_gateways_token_is_never_shown(staff):
    gateway_services.register_gateway(name="edge-1", url="http://edge-1.example", token=GATEWAY_TOKEN, by="tests")
    row = Gateway.objects.get(name="edge-1")
    for url in ("/admin/catalog/gateway/", f"/admin/catalog/gateway/{row.pk}/change/"):
        body = text(staff.get(url))
        assert GATEWAY_TOKEN not in body and row.token_encrypted not in body and row.token_hash not in body
    assert "in_sync" in text(staff.get("/admin/catalog/gateway/")) or "never_seen" in text(
        staff.get("/admin/catalog/gateway/"))


def test_a_settings_version_shows_peer_tokens_masked(staff):
    selectors.settings_in_force()
    peers = {"peers": [{"name": "east", "url": "https://east.example", "token": PEER_TOKEN}]}
    settings_services.set_setting(key="federation", value=peers, base_version=1, by="alice")
    version = SettingsVersion.objects.get(number=2)
    body = text(staff.get(f"/admin/catalog/settingsversion/{version.pk}/change/"))
    assert "east.example" in body and "********" in body and PEER_TOKEN not in body


@pytest.mark.parametrize("model", ["settingsversion", "catalogversion", "auditevent"])
def test_history_and_audit_are_read_only(staff, model):
    add("rt/chat")
    assert staff.get(f"/admin/catalog/{model}/add/").status_code == 403
    row = {"settingsversion": SettingsVersion, "catalogversion": CatalogVersion,
           "auditevent": AuditEvent}[model].objects.first()
    page = text(staff.get(f"/admin/catalog/{model}/{row.pk}/change/"))
    assert 'name="_save"' not in page
    assert staff.post(f"/admin/catalog/{model}/{row.pk}/delete/", {"post": "yes"}).status_code == 403
    assert type(row).objects.filter(pk=row.pk).exists()


def test_an_invalid_definition_edited_in_admin_is_refused_with_the_builders_message(staff):
    add("rt/chat")
    before = StoredModel.objects.get(name="rt/chat").definition
    versions = CatalogVersion.objects.count()
    definition = {"name": "rt/chat", "source": "hf://acme/chat", "scaling": {"min": 3, "max": 1},
                  "fallbacks": ["nowhere"]}
    response = staff.post(change_url("rt/chat"), {"definition": json.dumps(definition)})
    assert response.status_code == 200  # the form again, with its errors
    errors = " ".join(response.context["adminform"].form.errors["definition"])
    assert "scaling" in errors and "nowhere" in errors
    assert StoredModel.objects.get(name="rt/chat").definition == before
    assert CatalogVersion.objects.count() == versions
    assert not AuditEvent.objects.filter(action="model.replace").exists()


def test_text_that_is_not_json_is_refused_on_the_definition(staff):
    add("rt/chat")
    response = staff.post(change_url("rt/chat"), {"definition": "{name: rt/chat"})
    assert "not valid JSON" in " ".join(response.context["adminform"].form.errors["definition"])


def test_a_valid_edit_in_admin_is_saved_through_the_service_and_audited_as_the_admin(staff, admin_user):
    add("rt/chat")
    definition = {"name": "rt/chat", "source": "hf://acme/chat-v2", "class": "critical"}
    response = staff.post(change_url("rt/chat"), {"definition": json.dumps(definition)})
    assert response.status_code == 302
    assert json.loads(StoredModel.objects.get(name="rt/chat").definition) == definition
    event = AuditEvent.objects.get(action="model.replace", object_id="rt/chat")
    assert event.actor == admin_user.username and event.after == definition
    assert selectors.in_force().catalog.resolve("rt/chat")["class"] == "critical"
    assert CatalogVersion.objects.order_by("-version").first().created_by == admin_user.username


def test_a_rename_in_admin_is_refused(staff):
    add("rt/chat")
    definition = {"name": "rt/other", "source": "hf://acme/chat"}
    response = staff.post(change_url("rt/chat"), {"definition": json.dumps(definition)})
    assert "to rename" in " ".join(response.context["adminform"].form.errors["definition"])
    assert not StoredModel.objects.filter(name="rt/other").exists()


def test_adding_in_admin_goes_through_the_service(staff, admin_user):
    selectors.in_force()
    refused = staff.post("/admin/catalog/storedmodel/add/",
                         {"definition": json.dumps({"name": "declared/llama", "source": "hf://acme/x"})})
    assert refused.status_code == 200
    assert "declared in the cluster settings" in " ".join(refused.context["adminform"].form.errors["definition"])
    assert not StoredModel.objects.exists()
    cpu = {"name": "rt/cpu", "source": "hf://acme/cpu", "profiles": [{"name": "cpu", "gpus": 0}]}
    refused = staff.post("/admin/catalog/storedmodel/add/", {"definition": json.dumps(cpu)})
    assert "min_memory_gb" in " ".join(refused.context["adminform"].form.errors["definition"])
    assert not StoredModel.objects.exists()
    added = staff.post("/admin/catalog/storedmodel/add/",
                       {"definition": json.dumps({"name": "rt/new", "source": "hf://acme/new"})})
    assert added.status_code == 302
    assert StoredModel.objects.get(name="rt/new").created_by == admin_user.username
    assert AuditEvent.objects.filter(action="model.add", object_id="rt/new", actor=admin_user.username).exists()


def test_a_removal_that_would_break_the_catalog_is_refused_and_the_row_kept(staff):
    add("rt/chat")
    add("rt/code", fallbacks=["rt/chat"])
    pk = StoredModel.objects.get(name="rt/chat").pk
    response = staff.post(f"/admin/catalog/storedmodel/{pk}/delete/", {"post": "yes"}, follow=True)
    assert "Not removed" in text(response) and "'rt/code' falls back to it" in text(response)
    assert StoredModel.objects.filter(name="rt/chat").exists()
    assert not AuditEvent.objects.filter(action="model.remove").exists()


def test_a_removal_in_admin_goes_through_the_service(staff, admin_user):
    add("rt/chat")
    pk = StoredModel.objects.get(name="rt/chat").pk
    response = staff.post(f"/admin/catalog/storedmodel/{pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not StoredModel.objects.exists()
    assert AuditEvent.objects.filter(action="model.remove", object_id="rt/chat", actor=admin_user.username).exists()
    assert selectors.in_force().catalog.resolve("rt/chat") is None


def test_the_bulk_remove_action_goes_through_the_service_model_by_model(staff):
    add("rt/chat")
    add("rt/code", fallbacks=["rt/chat"])
    add("rt/solo")
    pks = list(StoredModel.objects.filter(name__in=["rt/chat", "rt/solo"]).values_list("pk", flat=True))
    response = staff.post("/admin/catalog/storedmodel/", {"action": "remove_selected", "_selected_action": pks},
                          follow=True)
    body = text(response)
    assert "Model rt/chat not removed" in body and "Removed rt/solo" in body
    assert set(StoredModel.objects.values_list("name", flat=True)) == {"rt/chat", "rt/code"}
    # Django's own bulk delete, which would go around the service, is not offered.
    assert "delete_selected" not in body
