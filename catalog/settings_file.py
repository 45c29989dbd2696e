"""The machine's settings file (LLMGW_SETTINGS_FILE), read when it changes.

Read again on every use, so an operator who edits it sees the console's
warning without a restart, and parsed once per change of its content.
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
_seen: dict[str, tuple[str, dict]] = {}  # path -> (content hash, data)


def read(path: str | None = None) -> dict:
    """The file as a mapping; an absent file is empty.

    Read on every call (it is small) and parsed again only when its
    content hash changed: a size or a timestamp can stay the same across
    an edit.
    """
    path = Path(path or django_settings.LLMGW_SETTINGS_FILE)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise SettingsFileError(f"the settings file {path} cannot be read: {exc}") from None
    digest = hashlib.sha256(raw).hexdigest()
    with _lock:
        hit = _seen.get(str(path))
    if hit is not None and hit[0] == digest:
        return hit[1]
    try:
        data = yaml.safe_load(raw.decode("utf-8")) or {}
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise SettingsFileError(f"the settings file {path} cannot be read: {exc}") from None
    if not isinstance(data, dict):
        raise SettingsFileError(f"the settings file {path} must be a mapping of keys")
    if hit is not None:
        log.info("the settings file %s changed (sha256 %s)", path, digest[:12])
    with _lock:
        _seen[str(path)] = (digest, data)
    return data
