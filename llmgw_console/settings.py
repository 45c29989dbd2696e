"""Django settings for the llmgw console.

Everything that differs between a laptop and production comes from the
environment (SPEC §9) through ``llmgw_console.env``, whose helpers refuse bad
values. The defaults are the embedded ones: SQLite in the project folder and
Celery tasks run in-process, so ``make run`` needs nothing but Python.
"""

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from llmgw_console.env import env_bool, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent

# --- Core -------------------------------------------------------------------

# The "django-insecure-" prefix makes `manage.py check --deploy` flag this key,
# so a production deploy that forgot DJANGO_SECRET_KEY cannot pass the check.
DEV_SECRET_KEY = "django-insecure-llmgw-console-development-key-do-not-use-in-production"
SECRET_KEY = env_str("DJANGO_SECRET_KEY", DEV_SECRET_KEY)
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
# Needed behind an HTTPS proxy, e.g. "https://console.example.com".
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_htmx",
    "template_partials",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "catalog",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Right after SecurityMiddleware so every later layer, the audit rows and
    # the log lines of this request can carry its id.
    "catalog.middleware.RequestIdMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "catalog.embedded.EmbeddedWorkerMiddleware",
    "catalog.middleware.DatabaseUnavailableMiddleware",
]

ROOT_URLCONF = "llmgw_console.urls"
WSGI_APPLICATION = "llmgw_console.wsgi.application"
ASGI_APPLICATION = "llmgw_console.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "catalog.views.common.roles",
            ],
        },
    },
]

# --- Database ---------------------------------------------------------------

_database_url = env_str("DATABASE_URL", "")
if _database_url:
    try:
        _default_db = dj_database_url.parse(
            _database_url, conn_max_age=60, conn_health_checks=True
        )
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL is not a usable database URL: {exc}") from None
else:
    _default_db = {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": BASE_DIR / "db.sqlite3",
    }

if _default_db["ENGINE"] == "django.db.backends.sqlite3":
    # SQLite has no advisory locks: IMMEDIATE takes the write lock when the
    # transaction begins, so two catalog rebuilds serialise instead of one
    # failing with "database is locked" when it upgrades a read to a write.
    # A persistent connection buys nothing on a local file.
    _default_db["CONN_MAX_AGE"] = 0
    _default_db["CONN_HEALTH_CHECKS"] = False
    _default_db.setdefault("OPTIONS", {}).update({"transaction_mode": "IMMEDIATE", "timeout": 20})

DATABASES = {"default": _default_db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Auth -------------------------------------------------------------------

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

# --- I18N, time, static -----------------------------------------------------

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "var" / "static"

# Catalog documents are small; anything bigger is a mistake or an attack.
DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024

# --- llmgw ------------------------------------------------------------------

LLMGW_SETTINGS_FILE = env_str("LLMGW_SETTINGS_FILE", str(BASE_DIR / "examples" / "llmgw.yaml"))
# Dotted path of the callable run before a model is added (weights reachable).
LLMGW_PRE_ADD_CHECK = env_str("LLMGW_PRE_ADD_CHECK", "catalog.checks.check_weights_loadable")
# On CI a test that needs PostgreSQL or Redis fails instead of skipping.
LLMGW_REQUIRE_SERVICES = env_bool("LLMGW_REQUIRE_SERVICES", False)
# How often the periodic reconcile re-pushes whatever the broker lost.
LLMGW_RECONCILE_SECONDS = env_int("LLMGW_RECONCILE_SECONDS", 30, minimum=1)
# How long one push to a gateway may take before it counts as failed.
LLMGW_PUSH_TIMEOUT_SECONDS = env_int("LLMGW_PUSH_TIMEOUT_SECONDS", 5, minimum=1)
# The longest wait between two retries of a failing gateway.
LLMGW_PUSH_BACKOFF_MAX_SECONDS = env_int("LLMGW_PUSH_BACKOFF_MAX_SECONDS", 60, minimum=1)
# How often peer clusters' offers are fetched (federation).
LLMGW_FEDERATION_SECONDS = env_int("LLMGW_FEDERATION_SECONDS", 30, minimum=1)
# Key for secrets kept encrypted (gateway tokens); derived from SECRET_KEY when unset.
LLMGW_ENCRYPTION_KEY = env_str("LLMGW_ENCRYPTION_KEY", "")
# Without a broker: run deliveries in the calling thread (tests) instead of
# the console's own background worker thread (make run).
LLMGW_TASKS_INLINE = env_bool("LLMGW_TASKS_INLINE", False)

# --- Celery -----------------------------------------------------------------

CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "")
if not CELERY_BROKER_URL:
    # No broker: run tasks in the calling process. A failing task must not
    # turn the edit that queued it into an error; the reconcile retries it.
    # memory:// with an explicit host: kombu warns on every connection otherwise.
    CELERY_BROKER_URL = "memory://localhost/"
    CELERY_TASK_ALWAYS_EAGER = True
    CELERY_TASK_EAGER_PROPAGATES = False
else:
    CELERY_TASK_ALWAYS_EAGER = False

# The database is the truth and tasks are idempotent: a task lost with its
# worker is redelivered rather than dropped, one at a time per worker process.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Publishing happens after an edit commits, inside the request. With Redis
# down it must give up within seconds (the reconcile recovers the nudge)
# instead of hanging the browser on kombu's default retries.
CELERY_BROKER_CONNECTION_TIMEOUT = 2
CELERY_BROKER_TRANSPORT_OPTIONS = {"max_retries": 1, "socket_connect_timeout": 1, "socket_timeout": 2}
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 1,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.2,
}
CELERY_TIMEZONE = TIME_ZONE
# Exactly one beat process runs this (README): the reconcile that makes
# every gateway converge whatever the broker lost.
CELERY_BEAT_SCHEDULE = {
    "reconcile-gateways": {"task": "catalog.tasks.reconcile", "schedule": float(LLMGW_RECONCILE_SECONDS)},
    "fetch-peer-offers": {"task": "catalog.tasks.fetch_peer_offers", "schedule": float(LLMGW_FEDERATION_SECONDS)},
}

# --- REST API ---------------------------------------------------------------

REST_FRAMEWORK = {
    # Bearer first: an anonymous call then gets 401 with WWW-Authenticate,
    # not the 403 that SessionAuthentication alone would give.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "catalog.api.auth.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "catalog.api.errors.exception_handler",
    "DEFAULT_PAGINATION_CLASS": "catalog.api.pagination.Pagination",
    "PAGE_SIZE": 50,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "llmgw console API",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # drf-spectacular serves the schema and docs to anyone by default; every
    # request but /api/v1/health is authenticated (SPEC §7, §8).
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # Separate request and response components: read-only fields must not
    # appear as required inputs (schemathesis would send them).
    "COMPONENT_SPLIT_REQUEST": True,
    # Served from drf_spectacular_sidecar: the docs work offline, no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {"ModelClassEnum": ["", "critical", "standard", "opportunistic"]},
}

# --- Logging ----------------------------------------------------------------

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain"},
    },
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "llmgw": {"handlers": ["console"], "level": "INFO", "propagate": False},
    },
}

# --- Security ---------------------------------------------------------------

X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SESSION_COOKIE_HTTPONLY = True

DJANGO_SECURE = env_bool("DJANGO_SECURE", False)
if DJANGO_SECURE and not DEBUG:
    # Production behind HTTPS: `DJANGO_SECURE=1 DJANGO_SECRET_KEY=... manage.py
    # check --deploy` must come out clean with these.
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = True
    SECURE_HSTS_SECONDS = 31536000
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_REFERRER_POLICY = "same-origin"
    # Only behind a proxy that sets X-Forwarded-Proto itself: otherwise a
    # client could claim HTTPS, and without it SSL redirect loops forever.
    if env_bool("DJANGO_SECURE_PROXY_SSL_HEADER", False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
