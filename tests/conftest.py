# ============================================================================
# Services: PostgreSQL and Redis
#
# Tests marked `postgres` or `redis` get the matching `require_*` fixture
# added at collection. Without the service they skip with the reason (listed
# by `-ra`), so `make test` runs anywhere; with LLMGW_REQUIRE_SERVICES=1
# (.ci/run) a missing service fails them instead, because a skip on CI would
# hide exactly the tests CI exists to run.
# ============================================================================

import os

# Playwright's sync API runs an event loop in the test thread; without this
# Django refuses ORM calls from it (SynchronousOnlyOperation) in live_server tests.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

import pytest  # noqa: E402

_REDIS_PING = {}


def _missing_service(reason):
    from django.conf import settings

    if settings.LLMGW_REQUIRE_SERVICES:
        pytest.fail(f"{reason} (LLMGW_REQUIRE_SERVICES is set, so this is a failure)", pytrace=False)
    pytest.skip(reason)


def _redis_answers(url):
    # One ping per session: a Redis that is down costs one timeout, not one per test.
    if url not in _REDIS_PING:
        import redis

        try:
            client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
            _REDIS_PING[url] = bool(client.ping())
            client.close()
        except redis.RedisError:
            _REDIS_PING[url] = False
    return _REDIS_PING[url]


@pytest.fixture
def require_postgres():
    from django.db import connection

    if connection.vendor != "postgresql":
        _missing_service("needs PostgreSQL: set DATABASE_URL")


@pytest.fixture
def require_redis():
    from django.conf import settings

    url = settings.CELERY_BROKER_URL or ""
    if not url.startswith(("redis://", "rediss://")):
        _missing_service("needs Redis: set CELERY_BROKER_URL=redis://...")
    if not _redis_answers(url):
        _missing_service(f"needs Redis: {url} does not answer")


_SERVICE_FIXTURES = {"postgres": "require_postgres", "redis": "require_redis"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = getattr(item, "fixturenames", None)
        if names is None:
            continue
        for marker, fixture in _SERVICE_FIXTURES.items():
            if item.get_closest_marker(marker) and fixture not in names:
                # First, so the check runs before database setup or a worker start.
                names.insert(0, fixture)


# ============================================================================
# Personas and shared fixtures (below this line)
# ============================================================================

import textwrap  # noqa: E402

import yaml  # noqa: E402

# The cluster the tests run against unless they say otherwise: small, with
# one declared model of each interesting shape, so a test that needs a
# declared name, an alias or a fallback target has one.
TEST_SETTINGS = {
    "listen": "127.0.0.1:8000",
    "node_name": "test-1",
    "cluster_name": "test",
    "engines": ["vllm", "llama.cpp", "sglang"],
    "defaults": {"engine": "vllm", "scaling": {"min": 1, "max": 2}},
    "models": [
        {"name": "declared/llama", "aliases": ["llama"], "source": "hf://meta-llama/Llama-3.1-8B-Instruct",
         "class": "critical"},
        {"name": "declared-cpu", "engine": "llama.cpp", "source": "file:///models/phi.gguf",
         "profiles": [{"name": "cpu", "gpus": 0, "min_memory_gb": 16, "cpu_cores": 8}]},
    ],
}


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """PBKDF2 at its production cost makes every persona take half a second."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _fresh_catalog_cache():
    """Each test starts with no catalog or credential remembered from
    another test's rows."""
    from catalog import credentials, selectors

    selectors.clear_cache()
    credentials.forget_all()
    yield
    selectors.clear_cache()
    credentials.forget_all()


@pytest.fixture(autouse=True)
def _tasks_inline_unless_redis(request, settings):
    """Tasks run inline in the test's thread, except in tests marked
    ``redis``, which run a real worker: a test that queued a delivery to a
    broker nobody consumes would leave work behind for the next test."""
    if request.node.get_closest_marker("redis"):
        yield
        return
    from llmgw_console.celery import app

    # Celery reads Django's settings live, so the app's own value is read
    # before they change, and given back (or dropped) after.
    had_own = "task_always_eager" in app.conf.changes
    own = app.conf.changes.get("task_always_eager")
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.LLMGW_TASKS_INLINE = True
    app.conf.task_always_eager = True
    yield
    if had_own:
        app.conf.task_always_eager = own
    else:
        app.conf.changes.pop("task_always_eager", None)


@pytest.fixture(autouse=True)
def settings_file(tmp_path, settings):
    """The settings file imported on first use; rewrite it with
    ``settings_file.write({...})`` before the first request of a test."""

    class SettingsFile:
        path = tmp_path / "llmgw.yaml"

        def write(self, document: dict) -> None:
            self.path.write_text(yaml.safe_dump(document, sort_keys=False))

        def write_text(self, text: str) -> None:
            self.path.write_text(textwrap.dedent(text))

    file = SettingsFile()
    file.write(TEST_SETTINGS)
    settings.LLMGW_SETTINGS_FILE = str(file.path)
    return file


def _user(django_user_model, role):
    from catalog.services.users import add_user

    return add_user(username=f"{role}-user", role=role, password="correct horse battery", by="tests")


def _api_client(user):
    from rest_framework.test import APIClient

    from catalog.services.users import create_token

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {create_token(username=user.username, by='tests')}")
    client.user = user
    return client


@pytest.fixture
def admin_user(db, django_user_model):
    return _user(django_user_model, "admin")


@pytest.fixture
def operator_user(db, django_user_model):
    return _user(django_user_model, "operator")


@pytest.fixture
def viewer_user(db, django_user_model):
    return _user(django_user_model, "viewer")


@pytest.fixture
def admin_api(admin_user):
    """An API client with an admin's bearer token."""
    return _api_client(admin_user)


@pytest.fixture
def operator_api(operator_user):
    return _api_client(operator_user)


@pytest.fixture
def viewer_api(viewer_user):
    return _api_client(viewer_user)


@pytest.fixture
def anonymous_api(db):
    from rest_framework.test import APIClient

    return APIClient()
