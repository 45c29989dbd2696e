"""The cluster settings document: its first import from the settings file."""

from __future__ import annotations

import logging
from pathlib import Path

import yaml
from django.conf import settings as django_settings

from ..builder.settings import split_keys, with_baseline_guard
from ..models import SettingsVersion
from . import audit
from .catalog import refresh_catalog
from .locking import catalog_change

log = logging.getLogger("llmgw.settings")


def read_settings_file(path: str | None = None) -> dict:
    """The machine's settings file as a mapping; an absent file is empty."""
    path = Path(path or django_settings.LLMGW_SETTINGS_FILE)
    if not path.exists():
        log.warning("settings file %s does not exist; starting with empty cluster settings", path)
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the settings file must be a mapping of keys")
    return data


def import_initial_settings() -> SettingsVersion | None:
    """Import the file's cluster keys as version 1, once, in whichever
    process first finds the store empty.

    Under the catalog lock, and checked again once it is held: two processes
    starting together must not both import.
    """
    with catalog_change():
        if SettingsVersion.objects.exists():
            return None
        path = django_settings.LLMGW_SETTINGS_FILE
        cluster, _machine = split_keys(read_settings_file(path))
        document = with_baseline_guard(cluster)
        version = SettingsVersion.objects.create(
            number=1, document=document, author="system", comment=f"imported from {path}", parent=None,
        )
        audit.record(actor="system", action="settings.import", object_type="settings", object_id="1",
                     before=None, after=document)
        log.info("imported the cluster settings from %s as version 1", path)
        refresh_catalog(reason="settings imported", by="system")
        return version
