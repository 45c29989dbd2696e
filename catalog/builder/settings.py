"""The settings document: its schema, and what the catalog takes from it.

Machine keys belong to one machine and stay in its file; cluster keys are
the same on every machine and live in the store as a versioned document.
Every problem is reported with its dotted path, like the model schema's,
so a form or a CLI can point at the key that is wrong.
"""

from __future__ import annotations

import re

from .catalog import unstorable
from .errors import Problem
from .rules import CLUSTER_NAME, HTTP_URL, whole_number
from .schema import DEFAULT_SCALING

MACHINE_KEYS = ("listen", "node_name", "tls", "log")
CLUSTER_KEYS = ("cluster_name", "engines", "defaults", "models", "federation", "guard")
DEFAULT_ENGINES = ("vllm",)
BASELINE_GUARD = {"policy": "baseline"}
GUARD_POLICIES = ("baseline", "strict", "permissive")
LOG_LEVELS = ("debug", "info", "warning", "error")
OFFER_MODES = ("all", "none")
SECRET_MASK = "********"

_ENGINE = re.compile(r"[A-Za-z0-9._-]{1,64}")
_LISTEN = re.compile(r"(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]*):[0-9]{1,5}")


def split_keys(document: dict) -> tuple[dict, dict]:
    """(cluster keys, machine keys) of a settings file."""
    cluster = {k: v for k, v in document.items() if k not in MACHINE_KEYS}
    machine = {k: v for k, v in document.items() if k in MACHINE_KEYS}
    return cluster, machine


def with_baseline_guard(cluster: dict) -> dict:
    """A cluster with no guard policy gets the baseline one, never none."""
    if cluster.get("guard") is None:
        return {**cluster, "guard": dict(BASELINE_GUARD)}
    return cluster


def engines_of(document: dict) -> tuple[str, ...]:
    engines = document.get("engines")
    if isinstance(engines, list) and engines:
        return tuple(e for e in engines if isinstance(e, str))
    return DEFAULT_ENGINES


def defaults_of(document: dict) -> dict:
    defaults = document.get("defaults")
    return defaults if isinstance(defaults, dict) else {}


def declared_of(document: dict) -> list:
    models = document.get("models")
    return models if isinstance(models, list) else []


class _Problems(list):
    def add(self, path: str, message: str) -> None:
        self.append(Problem("", path, message))

    def unknown(self, mapping: dict, allowed, prefix: str) -> None:
        for key in mapping:
            if key not in allowed:
                self.add(f"{prefix}{key}", f"unknown key {key!r}")


def _is_int(value: object) -> bool:
    return type(value) is int


def cluster_problems(document: object) -> list[Problem]:
    """What is wrong with a cluster settings document, key by key.

    The models under ``models`` are the model schema's business (the
    builder checks them when the catalog is built); this checks the shape
    of everything around them.
    """
    problems = _Problems()
    if not isinstance(document, dict):
        problems.add("", "the cluster settings must be a mapping of keys")
        return problems
    for key, value in document.items():
        if unstorable(value):
            problems.add(str(key), f"{key!r} holds characters that cannot be stored (a NUL or a lone surrogate)")
    for key in document:
        if key in MACHINE_KEYS:
            problems.add(key, f"{key!r} is a machine key: it belongs in each machine's settings file, not the cluster's")
        elif key not in CLUSTER_KEYS:
            problems.add(key, f"unknown key {key!r} (cluster keys: {', '.join(CLUSTER_KEYS)})")

    name = document.get("cluster_name")
    if name is not None and (not isinstance(name, str) or not CLUSTER_NAME.fullmatch(name)):
        problems.add("cluster_name", "cluster_name must be a-z, 0-9 and -, at most 63 characters")

    engines = document.get("engines")
    if engines is not None:
        if not isinstance(engines, list) or not engines:
            problems.add("engines", "engines must be a non-empty list of engine names")
        else:
            seen = set()
            for i, engine in enumerate(engines):
                if not isinstance(engine, str) or not _ENGINE.fullmatch(engine):
                    problems.add(f"engines.{i}", "an engine name is letters, digits, '.', '_' and '-'")
                elif engine in seen:
                    problems.add(f"engines.{i}", f"engine {engine!r} is listed twice")
                else:
                    seen.add(engine)

    _defaults(document.get("defaults"), engines_of(document), problems)
    models = document.get("models")
    if models is not None and not isinstance(models, list):
        problems.add("models", "models must be a list of model definitions")
    _federation(document.get("federation"), name, problems)
    _guard(document.get("guard"), problems)
    return list(problems)


def _defaults(defaults: object, engines: tuple[str, ...], problems: _Problems) -> None:
    if defaults is None:
        return
    if not isinstance(defaults, dict):
        problems.add("defaults", "defaults must be a mapping {engine, scaling}")
        return
    problems.unknown(defaults, ("engine", "scaling"), "defaults.")
    engine = defaults.get("engine")
    if engine is not None and not (isinstance(engine, str) and engine in engines):
        problems.add("defaults.engine", f"defaults.engine {engine!r} is not one of the engines ({', '.join(engines)})")
    scaling = defaults.get("scaling")
    if scaling is None:
        return
    if not isinstance(scaling, dict):
        problems.add("defaults.scaling", "defaults.scaling must be a mapping {min, max}")
        return
    problems.unknown(scaling, ("min", "max"), "defaults.scaling.")
    low, high = scaling.get("min", DEFAULT_SCALING["min"]), scaling.get("max", DEFAULT_SCALING["max"])
    if not _is_int(low) or low < 0:
        problems.add("defaults.scaling.min", "defaults.scaling.min must be a whole number, 0 or more")
    if not _is_int(high) or high < 1:
        problems.add("defaults.scaling.max", "defaults.scaling.max must be a whole number, 1 or more")
    elif _is_int(low) and high < low:
        problems.add("defaults.scaling.max", f"defaults.scaling.max ({high}) is below defaults.scaling.min ({low})")


def _federation(federation: object, cluster_name: object, problems: _Problems) -> None:
    if federation is None:
        return
    if not isinstance(federation, dict):
        problems.add("federation", "federation must be a mapping {peers, offer}")
        return
    problems.unknown(federation, ("peers", "offer", "interval_seconds"), "federation.")
    peers = federation.get("peers", [])
    if not isinstance(peers, list):
        problems.add("federation.peers", "federation.peers must be a list of {name, url, token}")
        peers = []
    seen = set()
    for i, peer in enumerate(peers):
        path = f"federation.peers.{i}"
        if not isinstance(peer, dict):
            problems.add(path, "a peer must be a mapping {name, url, token}")
            continue
        problems.unknown(peer, ("name", "url", "token"), f"{path}.")
        peer_name = peer.get("name")
        if not isinstance(peer_name, str) or not CLUSTER_NAME.fullmatch(peer_name):
            problems.add(f"{path}.name", "a peer's name is a-z, 0-9 and -")
        elif peer_name in seen:
            problems.add(f"{path}.name", f"peer {peer_name!r} is listed twice")
        elif peer_name == cluster_name:
            problems.add(f"{path}.name", "a peer cannot have this cluster's own name")
        else:
            seen.add(peer_name)
        url = peer.get("url")
        if not isinstance(url, str) or not HTTP_URL.fullmatch(url):
            problems.add(f"{path}.url", "a peer's url is http(s)://HOST[:PORT][/PATH]")
        token = peer.get("token")
        if not isinstance(token, str) or not token:
            problems.add(f"{path}.token", "a peer's token is required (the secret it gave this cluster)")
        elif token == SECRET_MASK:
            # Still the mask: a new or renamed peer whose secret was never given.
            problems.add(f"{path}.token", "give the peer's token: there is no stored token for this peer to keep")
    offer = federation.get("offer", "all")
    if isinstance(offer, list):
        for i, item in enumerate(offer):
            if not isinstance(item, str) or not item:
                problems.add(f"federation.offer.{i}", "an offered model is named by its name")
    elif offer not in OFFER_MODES:
        problems.add("federation.offer", "federation.offer is all, none, or a list of model names")
    interval = federation.get("interval_seconds")
    if interval is not None and (not _is_int(interval) or interval < 5):
        problems.add("federation.interval_seconds", "federation.interval_seconds must be a whole number, 5 or more")


def _guard(guard: object, problems: _Problems) -> None:
    if guard is None:
        return
    if not isinstance(guard, dict):
        problems.add("guard", "guard must be a mapping {policy}")
        return
    problems.unknown(guard, ("policy",), "guard.")
    if guard.get("policy") not in GUARD_POLICIES:
        problems.add("guard.policy", f"guard.policy must be one of {', '.join(GUARD_POLICIES)}")


def machine_problems(document: object) -> list[Problem]:
    """What is wrong with a machine's own keys in its settings file."""
    problems = _Problems()
    if not isinstance(document, dict):
        problems.add("", "the settings file must be a mapping of keys")
        return problems
    listen = document.get("listen")
    if listen is not None and (not isinstance(listen, str) or not _LISTEN.fullmatch(listen)):
        problems.add("listen", "listen is HOST:PORT")
    node = document.get("node_name")
    if node is not None and (not isinstance(node, str) or not node):
        problems.add("node_name", "node_name must be a non-empty string")
    tls = document.get("tls")
    if tls is not None:
        if not isinstance(tls, dict):
            problems.add("tls", "tls must be a mapping {enabled, cert, key}")
        else:
            problems.unknown(tls, ("enabled", "cert", "key"), "tls.")
            if "enabled" in tls and not isinstance(tls["enabled"], bool):
                problems.add("tls.enabled", "tls.enabled must be true or false")
            for key in ("cert", "key"):
                if key in tls and not isinstance(tls[key], str):
                    problems.add(f"tls.{key}", f"tls.{key} must be a file path")
    log = document.get("log")
    if log is not None:
        if not isinstance(log, dict):
            problems.add("log", "log must be a mapping {level, format}")
        else:
            problems.unknown(log, ("level", "format"), "log.")
            if "level" in log and log["level"] not in LOG_LEVELS:
                problems.add("log.level", f"log.level must be one of {', '.join(LOG_LEVELS)}")
            if "format" in log and log["format"] not in ("text", "json"):
                problems.add("log.format", "log.format must be text or json")
    return list(problems)


def file_problems(document: object) -> list[Problem]:
    """A whole settings file: machine keys and cluster keys."""
    if not isinstance(document, dict):
        return [Problem("", "", "the settings file must be a mapping of keys")]
    cluster, machine = split_keys(document)
    return [*machine_problems(machine), *cluster_problems(cluster)]


def mask_secrets(document: dict) -> dict:
    """The document as it may be shown: peer tokens replaced by a mask.

    A token is a shared secret the peer will accept from us; showing it in
    a page, an API answer or a diff would hand it to every viewer.
    """
    federation = document.get("federation") if isinstance(document, dict) else None
    if not isinstance(federation, dict) or not isinstance(federation.get("peers"), list):
        return document
    peers = [{**p, "token": SECRET_MASK} if isinstance(p, dict) and "token" in p else p
             for p in federation["peers"]]
    return {**document, "federation": {**federation, "peers": peers}}


def keep_masked_secrets(document: dict, current: dict) -> dict:
    """A written document whose peer tokens are still the mask keeps the
    tokens the store has for the same peers, so a document read, edited and
    written back does not replace every secret with asterisks."""
    federation = document.get("federation") if isinstance(document, dict) else None
    if not isinstance(federation, dict) or not isinstance(federation.get("peers"), list):
        return document
    old_federation = current.get("federation") if isinstance(current, dict) else None
    old_peers = old_federation.get("peers") if isinstance(old_federation, dict) else None
    old_peers = old_peers if isinstance(old_peers, list) else []
    old_tokens = {p.get("name"): p.get("token") for p in old_peers if isinstance(p, dict)}
    peers = []
    for p in federation["peers"]:
        if isinstance(p, dict) and p.get("token") == SECRET_MASK and isinstance(old_tokens.get(p.get("name")), str):
            p = {**p, "token": old_tokens[p["name"]]}
        peers.append(p)
    return {**document, "federation": {**federation, "peers": peers}}


class SettingsKeyError(LookupError):
    """A dotted key that does not name anything in the document."""


def _segments(key: str) -> list[str]:
    if not isinstance(key, str) or not key or any(not part for part in key.split(".")):
        raise SettingsKeyError(f"{key!r} is not a dotted key (like defaults.scaling.max)")
    return key.split(".")


def _step(node: object, part: str, key: str):
    if isinstance(node, dict):
        if part not in node:
            raise SettingsKeyError(f"{key!r} is not set")
        return node[part]
    index = whole_number(part)
    if isinstance(node, list) and index is not None and index < len(node):
        return node[index]
    raise SettingsKeyError(f"{key!r} is not set")


def get_key(document: dict, key: str):
    """The value at a dotted key (list items by index: models.0.name)."""
    node: object = document
    for part in _segments(key):
        node = _step(node, part, key)
    return node


def set_key(document: dict, key: str, value) -> dict:
    """A copy of the document with the dotted key set; mappings on the way
    are created, list items must exist."""
    parts = _segments(key)
    return _set(document, parts, value, key)


def _set(node: object, parts: list[str], value, key: str):
    head, rest = parts[0], parts[1:]
    if isinstance(node, list):
        if whole_number(head) is None or whole_number(head) >= len(node):
            raise SettingsKeyError(f"{key!r}: {head!r} is not an index of that list")
        out = list(node)
        out[int(head)] = _set(node[int(head)], rest, value, key) if rest else value
        return out
    if node is None:
        node = {}
    if not isinstance(node, dict):
        raise SettingsKeyError(f"{key!r}: {head!r} is inside a value that is not a mapping")
    out = dict(node)
    out[head] = _set(node.get(head), rest, value, key) if rest else value
    return out


def unset_key(document: dict, key: str) -> dict:
    """A copy of the document without the dotted key (a list item is removed)."""
    parts = _segments(key)
    get_key(document, key)  # raises when it is not set
    return _unset(document, parts)


def _unset(node, parts: list[str]):
    head, rest = parts[0], parts[1:]
    if isinstance(node, list):
        out = list(node)
        if rest:
            out[int(head)] = _unset(node[int(head)], rest)
        else:
            del out[int(head)]
        return out
    out = dict(node)
    if rest:
        out[head] = _unset(node[head], rest)
    else:
        del out[head]
    return out


def flatten(document: object, prefix: str = "") -> dict[str, object]:
    """Dotted key -> value, mapping by mapping. A list of named items (the
    models, the peers) is keyed by name, so a diff says which model
    changed rather than which index moved."""
    if isinstance(document, dict) and document:
        out: dict[str, object] = {}
        for key, value in document.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(document, list) and document and all(
            isinstance(item, dict) and isinstance(item.get("name"), str) for item in document):
        names = [item["name"] for item in document]
        if len(set(names)) == len(names):
            out = {}
            for item in document:
                out.update(flatten(item, f"{prefix}[{item['name']}]"))
            return out
    return {prefix: document}


def diff_documents(old: dict, new: dict) -> list[dict]:
    """Key-level differences: ``[{"key", "change": added|removed|changed, "before", "after"}]``."""
    a, b = flatten(old), flatten(new)
    out = []
    for key in sorted(a.keys() | b.keys()):
        if key not in b:
            out.append({"key": key, "change": "removed", "before": a[key], "after": None})
        elif key not in a:
            out.append({"key": key, "change": "added", "before": None, "after": b[key]})
        elif a[key] != b[key]:
            out.append({"key": key, "change": "changed", "before": a[key], "after": b[key]})
    return out
