"""The machine's settings file (LLMGW_SETTINGS_FILE), read when it changes.

Read again whenever its size or modification time changes, so an operator
who edits it sees the console's warning without a restart, and parsed once
per change, not once per request.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from pathlib import Path

import yaml
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured

log = logging.getLogger("llmgw.settings")


class SettingsFileError(ImproperlyConfigured):
    """The machine's settings file cannot be read as settings."""


_lock = threading.Lock()
_seen: dict[str, tuple[tuple, str, dict]] = {}  # path -> (stat key, content hash, data)


def read(path: str | None = None) -> dict:
    """The file as a mapping; an absent file is empty."""
    path = Path(path or django_settings.LLMGW_SETTINGS_FILE)
    try:
        stat = path.stat()
    except FileNotFoundError:
        return {}
    key = (stat.st_mtime_ns, stat.st_size)
    with _lock:
        hit = _seen.get(str(path))
    if hit is not None and hit[0] == key:
        return hit[2]
    try:
        raw = path.read_bytes()
        data = yaml.safe_load(raw.decode("utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise SettingsFileError(f"the settings file {path} cannot be read: {exc}") from None
    if not isinstance(data, dict):
        raise SettingsFileError(f"the settings file {path} must be a mapping of keys")
    digest = hashlib.sha256(raw).hexdigest()
    if hit is not None and hit[1] != digest:
        log.info("the settings file %s changed (sha256 %s)", path, digest[:12])
    with _lock:
        _seen[str(path)] = (key, digest, data)
    return data
