"""``manage.py demo``, which ``make run`` calls on every start."""

import re
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from catalog import selectors
from catalog.models import AuditEvent, SettingsVersion
from catalog.roles import role_of


def password_of(output: str) -> str:
    match = re.search(r"^\s*password\s+(\S+)", output, re.MULTILINE)
    assert match, output
    return match.group(1)


def test_demo_twice_imports_once_adds_models_once_and_prints_a_working_login(run, settings_file):
    settings_file.write_text((Path(settings.BASE_DIR) / "examples" / "llmgw.yaml").read_text())

    first = run("demo")
    second = run("demo")

    assert SettingsVersion.objects.count() == 1
    assert "http://127.0.0.1:8000/" in second
    assert re.search(r"^\s*username\s+admin$", second, re.MULTILINE)
    assert "manage.py tokens create admin" in second
    catalog = selectors.in_force().catalog
    tinyllama = catalog.resolve("demo/tinyllama")
    assert tinyllama["source"] == "hf://TinyLlama/TinyLlama-1.1B-Chat-v1.0"
    assert tinyllama["fallbacks"] == ["llama3"]
    cpu = [m for m in catalog.models() if m["name"].startswith("demo/") and m["profiles"][0]["gpus"] == 0]
    assert cpu and cpu[0]["profiles"][0]["min_memory_gb"] > 0
    assert AuditEvent.objects.filter(action="model.add", object_id="demo/tinyllama").count() == 1
    assert catalog.skipped == []

    old, new = password_of(first), password_of(second)
    assert old != new
    assert Client().login(username="admin", password=new)
    assert not Client().login(username="admin", password=old)
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_staff and admin.is_superuser and role_of(admin) == "admin"


def test_demo_login_opens_django_admin(run, settings_file):
    client = Client()
    assert client.login(username="admin", password=password_of(run("demo")))

    response = client.get("/admin/catalog/storedmodel/")

    assert response.status_code == 200
    assert b"demo/tinyllama" in response.content


def test_demo_works_with_settings_that_do_not_declare_llama3(run):
    # The test settings declare `llama`, not `llama3`: the demo still adds
    # its models, without a fallback that would not resolve.
    password_of(run("demo"))

    assert selectors.in_force().catalog.resolve("demo/tinyllama")["fallbacks"] == []
    assert run.stderr == ""
