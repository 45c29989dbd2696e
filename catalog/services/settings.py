"""The cluster settings document: imported once, then versioned in the store.

Every write names the version it was based on and is refused when another
write landed first (compare-and-set): two admins editing the same document
must not silently undo each other. Every write is validated before it is
stored — the schema, and the declared models must build a catalog with the
runtime rows that load — and puts the new catalog in force in the same
transaction.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import yaml
from django.conf import settings as django_settings

from .. import builder, credentials, settings_file
from ..builder import CatalogError, Problem
from ..builder.rules import whole_number
from ..builder.settings import (
    SettingsKeyError,
    cluster_problems,
    file_problems,
    keep_masked_secrets,
    mask_secrets,
    set_key,
    split_keys,
    unset_key,
    with_baseline_guard,
)
from ..models import SettingsVersion
from ..selectors import ClusterSettings, InForce, build_in_force, in_force, remember_in_force
from . import audit
from .catalog import record_version, refresh_catalog
from .errors import Conflict, NotFound
from .locking import catalog_change

log = logging.getLogger("llmgw.settings")


def import_initial_settings() -> SettingsVersion | None:
    """Import the file's cluster keys as version 1, once, in whichever
    process first finds the store empty.

    Under the catalog lock, and checked again once it is held: two processes
    starting together must not both import. A file that does not validate
    is refused rather than imported: after the import the file's cluster
    keys are ignored, so importing a broken one would lose it.
    """
    with catalog_change(importing=True):
        if SettingsVersion.objects.exists():
            return None
        path = django_settings.LLMGW_SETTINGS_FILE
        if not Path(path).exists():
            log.warning("settings file %s does not exist; starting with empty cluster settings", path)
        data = settings_file.read(path)
        problems = file_problems(data)
        if problems:
            raise settings_file.SettingsFileError(f"the settings file {path} is invalid: {CatalogError(problems).summary()}")
        cluster, _machine = split_keys(data)
        document = with_baseline_guard(cluster)
        version = SettingsVersion.objects.create(
            number=1, document=document, author="system", comment=f"imported from {path}", parent=None,
        )
        audit.record(actor="system", action="settings.import", object_type="settings", object_id="1",
                     before=None, after=mask_secrets(document))
        log.info("imported the cluster settings from %s as version 1", path)
        refresh_catalog(reason="settings imported", by="system")
        return version


@dataclass(frozen=True)
class SettingsWrite:
    version: int | None  # None for a preview
    document: dict
    impact: dict


def _in_models(problems: list[Problem], declared: list) -> list[Problem]:
    """The builder names declared models by name; the settings document
    names them by their place under ``models``."""
    position = {m.get("name"): i for i, m in enumerate(declared) if isinstance(m, dict)}
    out = []
    for p in problems:
        i = position.get(p.model)
        if i is None and p.model.startswith("#"):
            i = whole_number(p.model[1:])
        if i is not None and i < len(declared):
            out.append(Problem("", f"models.{i}.{p.path}" if p.path else f"models.{i}", p.message))
        else:
            out.append(Problem("", "models", f"{p.model}: {p.message}" if p.model else p.message))
    return out


def _evaluate(document: object, before: InForce) -> tuple[InForce, dict]:
    """The catalog this document would put in force, and what changes."""
    problems = cluster_problems(document)
    if problems:
        raise CatalogError(problems)
    settings = ClusterSettings(version=None, document=document)
    try:
        after = build_in_force(settings, before.rows)
    except CatalogError as exc:
        raise CatalogError(_in_models(exc.problems, settings.declared)) from None
    return after, impact_of(before, after)


def impact_of(before: InForce, after: InForce) -> dict:
    """What a settings change does to the catalog in force: models added,
    removed and changed (field by field), runtime models it would skip, and
    skipped ones it would bring back."""
    diff = builder.diff_models(before.catalog.models(), after.catalog.models())
    was_skipped = {(s.kind, s.name) for s in before.catalog.skipped}
    now_skipped = {(s.kind, s.name) for s in after.catalog.skipped}
    return {
        **diff,
        "skipped": [s._asdict() for s in after.catalog.skipped if (s.kind, s.name) not in was_skipped],
        "restored": sorted(name for kind, name in was_skipped - now_skipped),
    }


def _parse_document(document: object) -> object:
    """A document may come as a mapping or as YAML text (the console's editor)."""
    if isinstance(document, str):
        try:
            document = yaml.safe_load(document)
        except yaml.YAMLError as exc:
            raise CatalogError([Problem("", "document", f"not valid YAML: {exc}")]) from None
    if not isinstance(document, dict):
        raise CatalogError([Problem("", "document", "the settings document must be a mapping of keys")])
    return document


def _newest() -> SettingsVersion:
    newest = SettingsVersion.objects.order_by("-number").first()
    if newest is None:  # an empty store imports first, so this is only a race with a wipe
        raise Conflict("there are no settings yet; start the console once to import them")
    return newest


def _check_base(base_version: object, newest: SettingsVersion) -> None:
    if type(base_version) is not int:
        raise CatalogError([Problem("", "base_version", "base_version is required: the version this change is based on")])
    if base_version != newest.number:
        raise Conflict(f"the settings changed since version {base_version}: version {newest.number} is the newest; "
                       f"review what changed between them and write again based on version {newest.number}")


def preview_settings(*, document: object, base_version: object = None) -> SettingsWrite:
    """Validation and impact of a document; nothing is stored."""
    document = _parse_document(document)
    newest = _newest()
    if base_version is not None:
        _check_base(base_version, newest)
    current = newest.document if isinstance(newest.document, dict) else {}
    document = with_baseline_guard(keep_masked_secrets(document, current))
    _after, impact = _evaluate(document, in_force())
    return SettingsWrite(None, mask_secrets(document), impact)


def _write(document: dict, *, base_version: object, by: str, comment: str, action: str,
           change=None) -> SettingsWrite:
    with catalog_change():
        newest = _newest()
        _check_base(base_version, newest)
        # A version written into the table by hand may not even be a mapping;
        # it must still be possible to replace it.
        current = newest.document if isinstance(newest.document, dict) else {}
        if change is not None:
            document = change(current)
        # Never without a guard policy: unsetting it goes back to the baseline.
        document = with_baseline_guard(keep_masked_secrets(_parse_document(document), current))
        before = in_force()
        after, impact = _evaluate(document, before)
        if "\x00" in str(comment or ""):
            raise CatalogError([Problem("", "comment", "comment holds a NUL character, which cannot be stored")])
        number = newest.number + 1
        SettingsVersion.objects.create(number=number, document=document, author=by or "system",
                                       comment=str(comment or "")[:2000], parent=newest.number)
        after = InForce(after.catalog, ClusterSettings(number, document), after.declared_names, after.federated,
                        after.rows)
        record_version(after.catalog, reason=f"{action} v{number}", by=by, settings_version=number)
        audit.record(actor=by, action=action, object_type="settings", object_id=str(number),
                     before=mask_secrets(current), after=mask_secrets(document))
        remember_in_force(after)  # last: its cache key covers every row this change wrote
        credentials.forget_all()  # peers' tokens may have changed
        return SettingsWrite(number, mask_secrets(document), impact)


def replace_settings(*, document: object, base_version: object, by: str, comment: str = "") -> SettingsWrite:
    return _write(document, base_version=base_version, by=by, comment=comment, action="settings.replace")


def set_setting(*, key: str, value: object, base_version: object, by: str, comment: str = "") -> SettingsWrite:
    def change(current: dict) -> dict:
        try:
            return set_key(current, key, value)
        except SettingsKeyError as exc:
            raise CatalogError([Problem("", "key", str(exc))]) from None

    return _write(None, base_version=base_version, by=by, comment=comment or f"set {key}",
                  action="settings.set", change=change)


def unset_setting(*, key: str, base_version: object, by: str, comment: str = "") -> SettingsWrite:
    def change(current: dict) -> dict:
        try:
            return unset_key(current, key)
        except SettingsKeyError as exc:
            raise NotFound(str(exc)) from None

    return _write(None, base_version=base_version, by=by, comment=comment or f"unset {key}",
                  action="settings.unset", change=change)


def rollback_settings(*, version: object, base_version: object, by: str, comment: str = "") -> SettingsWrite:
    """A new version with an old version's content: version numbers only
    grow, so a gateway never sees the settings go backwards."""
    if type(version) is not int:
        raise CatalogError([Problem("", "version", "version must be a settings version number")])
    old = SettingsVersion.objects.filter(number=version).first()
    if old is None:
        raise NotFound(f"no settings version {version}")
    return _write(old.document, base_version=base_version, by=by, comment=comment or f"rollback to v{version}",
                  action="settings.rollback")


def import_settings_file(*, path: str, base_version: object, by: str, comment: str = "") -> SettingsWrite:
    """Re-import a settings file's cluster keys, explicitly, as a new version."""
    if not Path(path).exists():
        raise NotFound(f"no settings file {path}")
    data = settings_file.read(path)
    problems = file_problems(data)
    if problems:
        raise CatalogError(problems)
    cluster, _machine = split_keys(data)
    return _write(with_baseline_guard(cluster), base_version=base_version, by=by,
                  comment=comment or f"imported from {path}", action="settings.import")
