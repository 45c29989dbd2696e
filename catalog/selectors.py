"""Reads: the settings and the catalog in force, listings, usage.

The catalog in force is always what the database says: it is rebuilt
whenever the rows it comes from change, and kept in this process only
while a cheap fingerprint of those rows stays the same, so a page read does
not rebuild ten thousand models.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field

from django.db import connection

from . import builder
from .builder.settings import cluster_problems, declared_of, defaults_of, engines_of
from .models import CatalogVersion, PeerOffer, SettingsVersion, StoredModel

log = logging.getLogger("llmgw.catalog")

DECLARED, FEDERATED, RUNTIME = "declared", "federated", "runtime"
KINDS = (DECLARED, FEDERATED, RUNTIME)


@dataclass(frozen=True)
class ClusterSettings:
    """The settings version in force and what the catalog takes from it."""

    version: int | None
    document: dict
    passed_over: tuple[tuple[int, str], ...] = ()  # newer versions that did not load, and why

    @property
    def engines(self) -> tuple[str, ...]:
        return engines_of(self.document)

    @property
    def defaults(self) -> dict:
        return defaults_of(self.document)

    @property
    def declared(self) -> list:
        return declared_of(self.document)


@dataclass(frozen=True)
class InForce:
    """The catalog in force, with what it was built from."""

    catalog: builder.Catalog
    settings: ClusterSettings
    declared_names: frozenset
    federated: list = field(default_factory=list)
    # The stored rows it was built from (name -> JSON text): a change made
    # under the lock starts from these instead of reading every row again.
    # Shared with the cache: copy before changing.
    rows: dict = field(default_factory=dict)

    def kind(self, model: dict) -> str:
        if "peer" in model:
            return FEDERATED
        return DECLARED if model["name"] in self.declared_names else RUNTIME


_lock = threading.Lock()
_cache: dict[str, tuple[object, object]] = {}


def _cached(name: str, key: object, compute):
    with _lock:
        hit = _cache.get(name)
    if hit is not None and hit[0] == key:
        return hit[1]
    value = compute()
    with _lock:
        _cache[name] = (key, value)
    return value


def settings_in_force() -> ClusterSettings:
    """The newest settings version that loads.

    A version that does not load is never put in force: a bad edit must not
    keep the console (and every gateway it feeds) down. The first start
    against an empty store imports the settings file.
    """
    return _cached("settings", _newest_settings_imported(), _settings_in_force)


def _newest_settings_imported() -> tuple:
    newest = _newest_settings()
    if newest is None:
        from .services.settings import import_initial_settings

        import_initial_settings()
        newest = _newest_settings()
    return newest


def _newest_settings() -> tuple | None:
    # The time as well as the number: a number alone could name two
    # documents when a transaction that wrote one was rolled back.
    return SettingsVersion.objects.order_by("-number").values_list("number", "created_at").first()


def clear_cache() -> None:
    with _lock:
        _cache.clear()


def _settings_in_force() -> ClusterSettings:
    passed_over = []
    for version in SettingsVersion.objects.order_by("-number").iterator(chunk_size=20):
        problem = settings_problem(version.document)
        if problem is None:
            if passed_over:
                log.warning("settings versions %s do not load; v%s is in force",
                            ", ".join(f"v{n}" for n, _ in passed_over), version.number)
            return ClusterSettings(version.number, version.document, tuple(passed_over))
        passed_over.append((version.number, problem))
    return ClusterSettings(None, {}, tuple(passed_over))


def settings_problem(document: object) -> str | None:
    """Why a settings document cannot be put in force, or None."""
    problems = cluster_problems(document)
    if problems:
        return builder.CatalogError(problems).summary()
    try:
        builder.load(declared_of(document), federated_models(document), (),
                     engines=engines_of(document), defaults=defaults_of(document))
    except builder.CatalogError as exc:
        return exc.summary()
    return None


def federated_models(document: dict) -> list[dict]:
    """The models the peers of these settings offer, as this cluster names
    them: ``PEER/MODEL``, aliases likewise, keeping only what a request
    needs to be routed to the peer. A peer no longer in the settings is
    not offered, whatever was fetched from it."""
    peers = [p.get("name") for p in peers_of(document)]
    out = []
    for offer in PeerOffer.objects.filter(peer__in=peers).order_by("peer"):
        for item in offer.offered if isinstance(offer.offered, list) else ():
            out.append(_federated(offer.peer, item))
    return out


def _federated(peer: str, item: object) -> dict:
    if not isinstance(item, dict):
        return {"name": None, "peer": peer}  # the builder says what is wrong with it
    def named(value):
        return f"{peer}/{value}" if isinstance(value, str) else value
    aliases = item.get("aliases")
    return {
        "name": named(item.get("name")),
        "aliases": [named(a) for a in aliases] if isinstance(aliases, list) else aliases,
        "description": item.get("description", ""),
        "engine": item.get("engine", ""),
        "peer": peer,
    }


def peers_of(document: dict) -> list[dict]:
    federation = document.get("federation") if isinstance(document, dict) else None
    peers = federation.get("peers") if isinstance(federation, dict) else None
    return [p for p in peers if isinstance(p, dict)] if isinstance(peers, list) else []


def stored_rows() -> list[tuple[str, str]]:
    return list(StoredModel.objects.values_list("name", "definition"))


_FINGERPRINT_SQL = None


def _stored_fingerprint() -> tuple:
    """What changes whenever what the catalog is built from changes: the
    newest settings version, the stored rows, the peers' offers.

    Counts and highest ids are assigned by the database; the newest audit
    id moves with every service write even when a row keeps its count and
    a writer's clock is behind (updated_at alone would miss that). One
    query of scalar subqueries, since every read pays for it.
    """
    global _FINGERPRINT_SQL
    if _FINGERPRINT_SQL is None:
        from .models import AuditEvent

        stored, audit, offers = StoredModel._meta.db_table, AuditEvent._meta.db_table, PeerOffer._meta.db_table
        versions = SettingsVersion._meta.db_table
        _FINGERPRINT_SQL = (
            f"SELECT (SELECT MAX(number) FROM {versions}), "
            f"(SELECT created_at FROM {versions} ORDER BY number DESC LIMIT 1), "
            f"(SELECT COUNT(*) FROM {stored}), (SELECT MAX(id) FROM {stored}), "
            f"(SELECT MAX(updated_at) FROM {stored}), (SELECT MAX(id) FROM {audit}), "
            f"(SELECT COUNT(*) FROM {offers}), (SELECT MAX(updated_at) FROM {offers})"
        )
    with connection.cursor() as cursor:
        cursor.execute(_FINGERPRINT_SQL)
        return tuple(cursor.fetchone())


def _in_force_key() -> tuple:
    """The newest settings version and the stored rows' fingerprint, in one
    query: every read of the catalog pays for it."""
    key = _stored_fingerprint()
    if key[0] is None:
        _newest_settings_imported()
        key = _stored_fingerprint()
    return key


def in_force() -> InForce:
    """The catalog in force (runtime rows that do not load are skipped)."""
    key = _in_force_key()
    return _cached("catalog", key, _load_in_force)


def _load_in_force() -> InForce:
    state = build_in_force(settings_in_force(), stored_rows())
    for skipped in state.catalog.skipped:
        log.warning("model %s was skipped at load: %s", skipped.name, skipped.reason)
    return state


def remember_in_force(state: InForce) -> None:
    """Keep the catalog a change just put in force, so the next read does
    not rebuild it. Called inside the change's transaction: the key then
    names the rows the change wrote, which no other state can have."""
    with _lock:
        _cache["catalog"] = (_in_force_key(), state)


def build_in_force(settings: ClusterSettings, rows) -> InForce:
    rows = dict(rows)
    federated = federated_models(settings.document)
    catalog = builder.load(settings.declared, federated, list(rows.items()), engines=settings.engines,
                           defaults=settings.defaults)
    declared_names = frozenset(m["name"] for m in settings.declared if isinstance(m, dict))
    return InForce(catalog, settings, declared_names, federated, rows)


def latest_catalog_version() -> CatalogVersion | None:
    """The newest catalog version, without its document (megabytes at ten
    thousand models): most callers need only its number and digest, and
    ``catalog_document_bytes`` reads the document once per process."""
    return CatalogVersion.objects.defer("document").order_by("-version").first()


def model_item(state: InForce, model: dict) -> dict:
    """A model as the API and the console show it."""
    return {
        **model,
        "kind": state.kind(model),
        "effective_class": builder.effective_class(model),
        "warnings": state.catalog.warnings(model["name"]),
    }


SORTS = {
    "name": lambda m: m["name"],
    "engine": lambda m: (m.get("engine") or "", m["name"]),
    "class": lambda m: (builder.effective_class(m) or "", m["name"]),
    "owner": lambda m: (m.get("owner") or "", m["name"]),
}


def sort_models(state: InForce, models: list[dict], key: str) -> list[dict]:
    """Sorted by ``name``, ``kind``, ``class``, ``engine`` or ``owner``; ``-key`` for descending."""
    descending = key.startswith("-")
    key = key.lstrip("-")
    if key == "kind":
        order = lambda m: (state.kind(m), m["name"])  # noqa: E731
    else:
        order = SORTS.get(key, SORTS["name"])
    return sorted(models, key=order, reverse=descending)


def definition_as_given(state: InForce, name: str) -> dict | None:
    """A local model's definition as its author wrote it (settings or the
    stored row), so a page can tell a field that was set from a default."""
    if name in state.declared_names:
        return next((m for m in state.settings.declared if isinstance(m, dict) and m.get("name") == name), None)
    text = StoredModel.objects.filter(name=name).values_list("definition", flat=True).first()
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def list_models(state: InForce, *, kind=None, cls=None, owner=None, engine=None, q=None) -> list[dict]:
    """Models in force, filtered; ``q`` searches names, aliases and descriptions."""
    needle = q.lower() if q else None
    out = []
    for m in state.catalog.models():
        if kind and state.kind(m) != kind:
            continue
        if cls and builder.effective_class(m) != cls:
            continue
        if owner is not None and owner != "" and m.get("owner", "") != owner:
            continue
        if engine and m.get("engine") != engine:
            continue
        if needle and needle not in m["name"].lower() and not any(needle in a.lower() for a in m["aliases"]) \
                and needle not in m.get("description", "").lower():
            continue
        out.append(m)
    return out


def settings_view() -> dict:
    """The layered view: the store's document over the machine's file.

    Each key says where its value comes from; a cluster key the file still
    sets is shown as ignored, and when it differs from the store the
    warnings name it, so nobody edits the file expecting it to matter.
    """
    from . import settings_file
    from .builder.settings import mask_secrets, split_keys

    settings = settings_in_force()
    newest = _newest_settings_imported()
    document = mask_secrets(settings.document)
    file_cluster, file_machine = split_keys(settings_file.read())
    file_cluster = mask_secrets(file_cluster)
    layers = [{"key": k, "value": v, "source": "store", "ignored": False} for k, v in document.items()]
    layers += [{"key": k, "value": v, "source": "file", "ignored": False} for k, v in file_machine.items()]
    layers += [{"key": k, "value": v, "source": "file", "ignored": True} for k, v in file_cluster.items()]
    warnings = [f"settings version {n} does not load and is not in force: {reason}"
                for n, reason in settings.passed_over]
    differing = sorted(k for k, v in file_cluster.items() if document.get(k) != v)
    if differing:
        warnings.append(
            "the settings file sets cluster keys that differ from the store and are ignored: "
            f"{', '.join(differing)}; the store's version {settings.version} is in force "
            "(import the file on purpose with manage.py config import FILE)")
    return {"version": settings.version, "newest_version": newest[0], "document": document,
            "layers": layers, "warnings": warnings}


def settings_version_item(version: SettingsVersion, *, with_document: bool = False) -> dict:
    from .builder.settings import mask_secrets

    item = {"number": version.number, "author": version.author, "created_at": version.created_at,
            "comment": version.comment, "parent": version.parent}
    if with_document:
        item["document"] = mask_secrets(version.document) if isinstance(version.document, dict) else version.document
    return item


_documents: dict[tuple[int, str], bytes] = {}


def catalog_document_bytes(version: CatalogVersion) -> bytes:
    """The document gateways receive and GET /api/v1/catalog returns,
    assembled around the stored models text so that the bytes the digest
    covers are sent unchanged. Versions never change once written, so the
    last few are kept: fifty gateways get one read of the document."""
    key = (version.version, version.digest)
    with _lock:
        hit = _documents.get(key)
    if hit is not None:
        return hit
    body = _document_bytes(version)
    with _lock:
        if len(_documents) >= 4:
            _documents.pop(next(iter(_documents)))
        _documents[key] = body
    return body


def _document_bytes(version: CatalogVersion) -> bytes:
    head = {
        "created_at": version.created_at.isoformat().replace("+00:00", "Z"),
        "digest": version.digest,
        "settings_version": version.settings_version,
        "version": version.version,
    }
    meta = json.dumps(head, sort_keys=True, separators=(",", ":"))
    return (meta[:-1] + ',"models":' + version.document + "}").encode("utf-8")


GATEWAY_STATES = ("in_sync", "behind", "failing", "rejected", "never_seen")


def gateway_state(gateway, latest: CatalogVersion | None) -> str:
    newest = latest.version if latest else None
    if newest is not None and gateway.rejected_version == newest:
        return "rejected"
    if gateway.acked_version is not None and (newest is None or gateway.acked_version >= newest):
        return "in_sync"
    if gateway.failures:
        return "failing"
    if gateway.acked_version is None and gateway.last_seen is None:
        return "never_seen"
    return "behind"


def gateway_item(gateway, latest: CatalogVersion | None) -> dict:
    """A gateway as the API shows it; the token never."""
    return {
        "name": gateway.name, "url": gateway.url, "enabled": gateway.enabled,
        "state": gateway_state(gateway, latest), "acked_version": gateway.acked_version,
        "acked_digest": gateway.acked_digest or None, "last_seen": gateway.last_seen,
        "last_error": gateway.last_error or None,
    }


def offer(state: InForce) -> dict:
    """What this cluster offers its peers: its own models only (never a
    peer's: re-offering would let requests bounce between clusters), as
    ``federation.offer`` says — all, none, or the named ones."""
    federation = state.settings.document.get("federation") or {}
    mode = federation.get("offer", "all") if isinstance(federation, dict) else "all"
    local = [m for m in state.catalog.models() if "peer" not in m]
    if mode == "none":
        local = []
    elif isinstance(mode, list):
        wanted = set(mode)
        local = [m for m in local if m["name"] in wanted]
    models = [{"name": m["name"], "aliases": m["aliases"], "description": m["description"],
               "engine": m["engine"]} for m in local]
    digest = builder.digest_of(builder.canonical_json(models))
    return {"cluster": state.settings.document.get("cluster_name", ""), "digest": digest, "models": models}


def federation_interval(document: dict) -> float:
    """Seconds between two fetches of a peer: ``federation.interval_seconds``,
    else LLMGW_FEDERATION_SECONDS."""
    from django.conf import settings as django_settings

    federation = document.get("federation") if isinstance(document, dict) else None
    interval = federation.get("interval_seconds") if isinstance(federation, dict) else None
    return float(interval) if type(interval) is int else float(django_settings.LLMGW_FEDERATION_SECONDS)


def peer_items() -> list[dict]:
    """Every peer of the settings in force as the console shows it: its
    last fetch, whether it is stale (three intervals without a good fetch:
    one slow answer is not yet a stale peer), the models it offers as this
    cluster names them. Its token never."""
    from django.utils import timezone

    document = settings_in_force().document
    rows = {row.peer: row for row in PeerOffer.objects.all()}
    stale_after = 3 * federation_interval(document)
    items = []
    for peer in peers_of(document):
        name, row = peer.get("name"), rows.get(peer.get("name"))
        fetched = row.fetched_at if row else None
        offered = row.offered if row and isinstance(row.offered, list) else []
        items.append({
            "name": name, "url": peer.get("url"), "fetched_at": fetched,
            "checked_at": row.checked_at if row else None,
            "stale": fetched is None or bool(row.last_error) or (timezone.now() - fetched).total_seconds() > stale_after,
            "last_error": (row.last_error or None) if row else None,
            "models": [f"{name}/{m['name']}" for m in offered if isinstance(m, dict) and isinstance(m.get("name"), str)],
        })
    return items
