# llmgw console: `make run` to try it, `make test` to check it.
# Every recipe calls .venv/bin/python directly; nothing needs activating.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.stamp
PYTEST_ARGS ?=

# Where `make test` looks for the optional services (ARCHITECTURE.md).
PG_URL := postgres://postgres@127.0.0.1:5432/llmgw
REDIS_URL := redis://127.0.0.1:6379/15

.PHONY: venv run test bench lint

venv: $(STAMP)

# Reinstall only when a requirements file is newer than the last install.
$(STAMP): requirements.txt requirements-dev.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -r requirements-dev.txt
	@touch $(STAMP)

# Fresh machine to a running console: SQLite, in-process tasks, the example
# settings imported, an admin login printed, and the demo gateway's
# reference receiver running beside the console (stopped with it) so that
# catalog pushes have somewhere to land. --insecure serves static files
# while DEBUG stays off (its default). Other ports: make run PORT=8100
# GATEWAY_PORT=8101.
run: PORT ?= 8000
run: GATEWAY_PORT ?= 8001
run: venv
	$(PY) manage.py migrate --noinput
	@mkdir -p var
	@set -e; \
	demo=$$($(PY) manage.py demo --port $(PORT) --gateway-port $(GATEWAY_PORT)); \
	printf '%s\n' "$$demo"; \
	receiver=$$(printf '%s\n' "$$demo" | grep -o 'manage.py run_reference_gateway .*'); \
	$(PY) $$receiver >var/demo-gateway.log 2>&1 & receiver_pid=$$!; \
	trap 'kill $$receiver_pid 2>/dev/null || true' EXIT INT TERM HUP; \
	for _ in $$(seq 50); do \
		$(PY) scripts/probe.py 127.0.0.1 $(GATEWAY_PORT) && break; \
		kill -0 $$receiver_pid 2>/dev/null || break; \
		sleep 0.2; \
	done; \
	if kill -0 $$receiver_pid 2>/dev/null; then \
		$(PY) manage.py gateways push demo-gateway || true; \
	else \
		echo "make run: the demo gateway's receiver did not start; see var/demo-gateway.log" >&2; \
	fi; \
	$(PY) manage.py runserver --insecure 127.0.0.1:$(PORT)

# The whole suite. PostgreSQL and Redis are used when they answer on
# localhost (and DATABASE_URL / CELERY_BROKER_URL are not set already);
# otherwise SQLite and in-process tasks, and the tests needing them skip.
test: venv
	@if [ -z "$${DATABASE_URL:-}" ] && $(PY) scripts/probe.py 127.0.0.1 5432; then \
		export DATABASE_URL=$(PG_URL); \
	fi; \
	if [ -z "$${CELERY_BROKER_URL:-}" ] && $(PY) scripts/probe.py 127.0.0.1 6379; then \
		export CELERY_BROKER_URL=$(REDIS_URL); \
	fi; \
	skip=""; \
	case "$${DATABASE_URL:-}" in \
		postgres*|pgsql*) db="PostgreSQL at $${DATABASE_URL##*@}" ;; \
		"") db="SQLite"; skip="postgres" ;; \
		*) db="$${DATABASE_URL%%:*}"; skip="postgres" ;; \
	esac; \
	case "$${CELERY_BROKER_URL:-}" in \
		redis*) tasks="Celery over Redis at $${CELERY_BROKER_URL##*@}" ;; \
		"") tasks="in-process tasks"; skip="$${skip:+$$skip and }redis" ;; \
		*) tasks="Celery over $${CELERY_BROKER_URL%%:*}"; skip="$${skip:+$$skip and }redis" ;; \
	esac; \
	echo "make test: $$db, $$tasks$${skip:+ (tests marked $$skip will skip)}"; \
	$(PY) -m pytest $(PYTEST_ARGS)

# Each benchmark prints one JSON line per figure.
bench: venv
	@set -e; found=0; for f in bench/b*.py; do \
		[ -e "$$f" ] || continue; found=1; \
		$(PY) "$$f"; \
	done; [ $$found = 1 ] || echo "make bench: no bench/b*.py yet" >&2

# Cheap static checks: everything compiles, Django's checks pass, and no
# model change is missing its migration.
lint: venv
	$(PY) -m compileall -q manage.py llmgw_console catalog tests bench scripts
	$(PY) manage.py check
	$(PY) manage.py makemigrations --check --dry-run
