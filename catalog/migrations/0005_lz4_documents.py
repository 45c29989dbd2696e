"""Catalog documents are large (a few MB at ten thousand models) and written
with every change: lz4 compresses them several times faster than
PostgreSQL's default, which was a fifth of a write at that size. Only on
PostgreSQL 14+ built with lz4; elsewhere the default stays."""

from django.db import migrations, transaction


def use_lz4(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql" or connection.pg_version < 140000:
        return
    table = apps.get_model("catalog", "CatalogVersion")._meta.db_table
    try:
        with transaction.atomic(using=connection.alias):
            schema_editor.execute(f"ALTER TABLE {table} ALTER COLUMN document SET COMPRESSION lz4")
    except Exception:  # a server built without lz4 keeps pglz
        pass


class Migration(migrations.Migration):
    dependencies = [("catalog", "0004_peer_offer")]
    operations = [migrations.RunPython(use_lz4, migrations.RunPython.noop)]
