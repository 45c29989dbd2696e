"""One catalog change at a time, across every process and machine.

Two rebuilds at once could record catalogs in either order, leaving the one
in force disagreeing with the database that outlives it. A thread mutex
would not do: the web workers, the Celery worker and a ``manage.py`` command
are different processes, often on different machines. PostgreSQL's
transaction-level advisory lock is released by COMMIT or ROLLBACK, so a
crashed process cannot leave it held.
"""

from __future__ import annotations

from contextlib import contextmanager

from django.db import connection, transaction

# Any constant shared by every process; "llmgw" in ASCII.
CATALOG_LOCK_KEY = 0x6C6C6D6777


@contextmanager
def catalog_change(*, importing: bool = False):
    """A transaction that holds the catalog lock until it commits.

    The settings file is imported first, in its own transaction, when the
    store is still empty: a change that is then refused must not roll the
    import back with it (every later request would import again).
    """
    if not importing:
        from ..selectors import settings_in_force

        settings_in_force()
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CATALOG_LOCK_KEY])
        # SQLite: the connection opens transactions with BEGIN IMMEDIATE
        # (settings.py), which takes the database's write lock at once.
        yield
