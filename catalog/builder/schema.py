"""One model's own fields: checked, and completed with the defaults.

Everything here looks at a single model. What needs the whole catalog
(names taken, fallbacks that resolve, cycles) is in ``catalog.py``.
"""

from __future__ import annotations

import math
from .rules import CLASSES, CLUSTER_NAME, name_problem, owner_problem, source_problem

DEFAULT_ENGINE = "vllm"
DEFAULT_SCALING = {"min": 1, "max": 1}
DEFAULT_PROFILE = {"name": "default", "gpus": 1}

LOCAL_FIELDS = frozenset(
    {"name", "aliases", "description", "engine", "source", "origin", "adapters", "profiles",
     "scaling", "class", "owner", "canary", "eval", "fallbacks"}
)
# A peer's model keeps only what a request needs to be routed to the peer;
# how it runs is the peer's business.
FEDERATED_FIELDS = frozenset({"name", "aliases", "description", "engine", "peer"})
ORIGIN_FIELDS = ("repo", "revision", "digest", "fetched_at")
PROFILE_FIELDS = ("name", "gpus", "gpu_type", "gpu_memory_gb", "min_memory_gb", "cpu_cores")
PROFILE_COUNTS = ("gpus", "gpu_memory_gb", "min_memory_gb", "cpu_cores")
DESCRIPTION_MAX = 2000
# Counts a gateway stores in a 32-bit integer; anything larger is a typo.
MAX_COUNT = 2**31 - 1


def _is_int(v: object) -> bool:
    return type(v) is int  # bool is an int to Python, never to an operator


def _is_number(v: object) -> bool:
    return (type(v) is int or type(v) is float) and math.isfinite(v)


class _Checker:
    """Collects problems for one model so every field gets looked at."""

    __slots__ = ("model", "problems", "warnings")

    def __init__(self, model: str):
        self.model = model
        self.problems: list[tuple[str, str]] = []
        self.warnings: list[str] = []

    def fail(self, path: str, message: str) -> None:
        self.problems.append((path, message))

    def unknown(self, obj: dict, allowed, prefix: str) -> None:
        for key in obj:
            if key not in allowed:
                self.fail(f"{prefix}{key}", f"unknown field {key!r}")

    def string(self, obj: dict, key: str, path: str, default: str = "") -> str:
        value = obj.get(key, default)
        if value is None:
            return default
        if not isinstance(value, str):
            self.fail(path, f"{key} must be a string")
            return default
        return value

    def string_list(self, value: object, path: str) -> list:
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(path, f"{path.rsplit('.', 1)[-1]} must be a list")
            return []
        return value


def normalize(raw: object, *, engines: frozenset, defaults: dict, label: str) -> tuple[dict | None, _Checker]:
    """The model as it will run, and what is wrong with it.

    ``label`` names the model in problems when it has no usable name.
    """
    if not isinstance(raw, dict):
        check = _Checker(label)
        check.fail("", "a model must be an object (a mapping of fields)")
        return None, check
    name = raw.get("name")
    check = _Checker(name if isinstance(name, str) and name else label)
    if "peer" in raw:
        return _federated(raw, check), check
    return _local(raw, check, engines, defaults), check


def _names(raw: dict, check: _Checker) -> tuple[str, list[str]]:
    name = raw.get("name")
    problem = name_problem(name)
    if problem:
        check.fail("name", problem)
        name = ""
    aliases = check.string_list(raw.get("aliases"), "aliases")
    out, seen = [], {name}
    for i, alias in enumerate(aliases):
        problem = name_problem(alias, "alias")
        if problem:
            check.fail(f"aliases.{i}", problem)
        elif alias in seen:
            check.fail(f"aliases.{i}", f"alias {alias!r} repeats the model's name or another alias")
        else:
            seen.add(alias)
            out.append(alias)
    return name, out


def _description(raw: dict, check: _Checker) -> str:
    text = check.string(raw, "description", "description")
    if len(text) > DESCRIPTION_MAX:
        check.fail("description", f"description is longer than {DESCRIPTION_MAX} characters")
    return text


def _federated(raw: dict, check: _Checker) -> dict:
    check.unknown(raw, FEDERATED_FIELDS, "")
    name, aliases = _names(raw, check)
    peer = raw.get("peer")
    if not isinstance(peer, str) or not CLUSTER_NAME.fullmatch(peer):
        check.fail("peer", "peer must be a peer cluster's name (a-z, 0-9 and -)")
        peer = ""
    else:
        prefix = peer + "/"
        for i, n in enumerate([name, *aliases]):
            if n and not n.startswith(prefix):
                path = "name" if i == 0 else f"aliases.{i - 1}"
                check.fail(path, f"a model federated from {peer!r} is named {prefix}MODEL")
    return {
        "name": name,
        "aliases": aliases,
        "description": _description(raw, check),
        "engine": check.string(raw, "engine", "engine"),
        "peer": peer,
    }


def _local(raw: dict, check: _Checker, engines: frozenset, defaults: dict) -> dict:
    check.unknown(raw, LOCAL_FIELDS, "")
    name, aliases = _names(raw, check)

    engine = check.string(raw, "engine", "engine", defaults.get("engine") or DEFAULT_ENGINE)
    if not engine:
        engine = defaults.get("engine") or DEFAULT_ENGINE
    if engine not in engines:
        known = ", ".join(sorted(engines)) or "none"
        check.fail("engine", f"engine {engine!r} is not one of this cluster's engines ({known})")

    source = raw.get("source")
    problem = source_problem(source)
    if problem:
        check.fail("source", problem)
        source = source if isinstance(source, str) else ""

    cls = check.string(raw, "class", "class")
    if cls and cls not in CLASSES:
        check.fail("class", f"class {cls!r} must be empty or one of {', '.join(CLASSES)}")

    owner = raw.get("owner")
    owner = "" if owner is None else owner
    problem = owner_problem(owner)
    if problem:
        check.fail("owner", problem)

    return {
        "name": name,
        "aliases": aliases,
        "description": _description(raw, check),
        "engine": engine,
        "source": source,
        "origin": _origin(raw.get("origin"), check),
        "adapters": _adapters(raw.get("adapters"), check),
        "profiles": _profiles(raw.get("profiles"), check),
        "scaling": _scaling(raw.get("scaling"), check, defaults),
        "class": cls,
        "owner": owner if isinstance(owner, str) else "",
        "canary": _canary(raw.get("canary"), check),
        "eval": _eval(raw.get("eval"), check),
        "fallbacks": _fallbacks(raw.get("fallbacks"), check),
    }


def _origin(value: object, check: _Checker) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        check.fail("origin", "origin must be an object or null")
        return None
    check.unknown(value, ORIGIN_FIELDS, "origin.")
    return {key: check.string(value, key, f"origin.{key}") for key in ORIGIN_FIELDS}


def _adapters(value: object, check: _Checker) -> list:
    out, seen = [], set()
    for i, item in enumerate(check.string_list(value, "adapters")):
        path = f"adapters.{i}"
        if not isinstance(item, dict):
            check.fail(path, "an adapter must be an object {name, source}")
            continue
        check.unknown(item, ("name", "source"), f"{path}.")
        name = item.get("name")
        problem = name_problem(name, "adapter name")
        if problem:
            check.fail(f"{path}.name", problem)
        elif name in seen:
            check.fail(f"{path}.name", f"adapter {name!r} appears twice")
        else:
            seen.add(name)
        source = item.get("source")
        problem = source_problem(source)
        if problem:
            check.fail(f"{path}.source", problem)
        out.append({"name": name, "source": source})
    return out


def _profiles(value: object, check: _Checker) -> list:
    # A model with no profile could not be placed anywhere; the default is
    # the common case, one GPU of whatever type the node has.
    items = check.string_list(value, "profiles") or [DEFAULT_PROFILE]
    out, seen = [], set()
    for i, item in enumerate(items):
        path = f"profiles.{i}"
        if not isinstance(item, dict):
            check.fail(path, "a profile must be an object")
            continue
        check.unknown(item, PROFILE_FIELDS, f"{path}.")
        name = item.get("name")
        if not isinstance(name, str) or not name:
            check.fail(f"{path}.name", "profile name is required")
        elif name in seen:
            check.fail(f"{path}.name", f"profile {name!r} appears twice")
        else:
            seen.add(name)
        profile = {"name": name, "gpu_type": check.string(item, "gpu_type", f"{path}.gpu_type")}
        for key in PROFILE_COUNTS:
            count = item.get(key, 1 if key == "gpus" else 0)
            if not _is_int(count) or not 0 <= count <= MAX_COUNT:
                check.fail(f"{path}.{key}", f"{key} must be a whole number from 0 to {MAX_COUNT}")
                count = 0
            profile[key] = count
        if is_cpu_only(profile) and profile["min_memory_gb"] == 0:
            # Allowed to load (rows stored before the rule), refused on add:
            # a replica with no GPU is all host memory, and one that declares
            # none fits everywhere as far as placement can tell.
            check.warnings.append(cpu_only_without_memory(name))
        out.append(profile)
    return out


def _scaling(value: object, check: _Checker, defaults: dict) -> dict:
    base = defaults.get("scaling") or DEFAULT_SCALING
    if value is None:
        value = {}
    if not isinstance(value, dict):
        check.fail("scaling", "scaling must be an object {min, max}")
        return dict(base)
    check.unknown(value, ("min", "max"), "scaling.")
    scaling = {}
    for key, least in (("min", 0), ("max", 1)):
        count = value.get(key, base.get(key, DEFAULT_SCALING[key]))
        if not _is_int(count) or not least <= count <= MAX_COUNT:
            check.fail(f"scaling.{key}", f"scaling.{key} must be a whole number from {least} to {MAX_COUNT}")
        scaling[key] = count
    if _is_int(scaling["min"]) and _is_int(scaling["max"]) and scaling["max"] < scaling["min"]:
        check.fail("scaling.max", f"scaling.max ({scaling['max']}) is below scaling.min ({scaling['min']})")
    return scaling


def _canary(value: object, check: _Checker) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        check.fail("canary", "canary must be an object {model, percent} or null")
        return None
    check.unknown(value, ("model", "percent"), "canary.")
    model = value.get("model")
    if not isinstance(model, str) or not model:
        check.fail("canary.model", "canary.model must name a model of the catalog")
    percent = value.get("percent")
    if not _is_int(percent) or not 1 <= percent <= 99:
        check.fail("canary.percent", "canary.percent must be a whole number from 1 to 99")
    return {"model": model, "percent": percent}


def _eval(value: object, check: _Checker) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        check.fail("eval", "eval must be an object {suite, min_score} or null")
        return None
    check.unknown(value, ("suite", "min_score"), "eval.")
    suite = value.get("suite")
    if not isinstance(suite, str) or not suite.strip():
        check.fail("eval.suite", "eval.suite must name a quality suite")
    score = value.get("min_score")
    if not _is_number(score) or not 0.0 <= score <= 1.0:
        check.fail("eval.min_score", "eval.min_score must be a number from 0.0 to 1.0")
    else:
        score = float(score)
    return {"suite": suite, "min_score": score}


def _fallbacks(value: object, check: _Checker) -> list:
    out = []
    for i, item in enumerate(check.string_list(value, "fallbacks")):
        if not isinstance(item, str) or not item:
            check.fail(f"fallbacks.{i}", "a fallback must name a model of the catalog")
        out.append(item)
    return out


def effective_class(model: dict) -> str | None:
    """The class a model is scheduled as: its own, or what its scaling says.

    A model that must always have a replica (min >= 1) is standard; one that
    may scale to zero is opportunistic. A peer's model has none here.
    """
    if "peer" in model:
        return None
    if model.get("class"):
        return model["class"]
    return "standard" if model["scaling"]["min"] >= 1 else "opportunistic"


def is_cpu_only(profile: dict) -> bool:
    return profile.get("gpus") == 0


def cpu_only_without_memory(profile_name: object) -> str:
    return (
        f"profile {profile_name!r} runs without a GPU and declares no memory (min_memory_gb): "
        "placement could not tell when a node is full"
    )


def add_refusals(model: dict) -> list[tuple[str, str]]:
    """What is allowed to load but refused when a model is added now."""
    out = []
    profiles = model.get("profiles") if isinstance(model, dict) else None
    for i, p in enumerate(profiles if isinstance(profiles, list) else ()):
        if isinstance(p, dict) and is_cpu_only(p) and not p.get("min_memory_gb"):
            out.append((f"profiles.{i}.min_memory_gb", cpu_only_without_memory(p.get("name"))))
    return out

