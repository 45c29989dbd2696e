"""The cluster settings document, as far as the catalog needs it.

Machine keys belong to one machine and stay in its file; cluster keys are
the same on every machine and live in the store as a versioned document.
"""

from __future__ import annotations

from .errors import Problem

MACHINE_KEYS = ("listen", "node_name", "tls", "log")
DEFAULT_ENGINES = ("vllm",)
BASELINE_GUARD = {"policy": "baseline"}


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
    return tuple(engines) if isinstance(engines, list) and engines else DEFAULT_ENGINES


def defaults_of(document: dict) -> dict:
    defaults = document.get("defaults")
    return defaults if isinstance(defaults, dict) else {}


def declared_of(document: dict) -> list:
    models = document.get("models")
    return models if isinstance(models, list) else []


def catalog_keys_problems(document: object) -> list[Problem]:
    """The shape of the keys the catalog is built from.

    What the models themselves must be is the model schema's business; this
    only makes sure the builder is handed lists and mappings.
    """
    if not isinstance(document, dict):
        return [Problem("", "", "the cluster settings must be a mapping of keys")]
    problems = []
    engines = document.get("engines")
    if engines is not None:
        if not isinstance(engines, list) or not all(isinstance(e, str) and e for e in engines):
            problems.append(Problem("", "engines", "engines must be a list of engine names"))
        elif len(set(engines)) != len(engines):
            problems.append(Problem("", "engines", "engines lists an engine twice"))
    defaults = document.get("defaults")
    if defaults is not None:
        if not isinstance(defaults, dict):
            problems.append(Problem("", "defaults", "defaults must be a mapping"))
        else:
            for key in defaults:
                if key not in ("engine", "scaling"):
                    problems.append(Problem("", f"defaults.{key}", f"unknown field {key!r}"))
            engine = defaults.get("engine")
            if engine is not None and not (isinstance(engine, str) and engine in engines_of(document)):
                problems.append(Problem("", "defaults.engine", f"defaults.engine {engine!r} is not one of the engines"))
            scaling = defaults.get("scaling")
            if scaling is not None:
                problems.extend(_scaling_problems(scaling))
    models = document.get("models")
    if models is not None and not isinstance(models, list):
        problems.append(Problem("", "models", "models must be a list of model definitions"))
    return problems


def _scaling_problems(scaling: object) -> list[Problem]:
    if not isinstance(scaling, dict):
        return [Problem("", "defaults.scaling", "defaults.scaling must be a mapping {min, max}")]
    problems = [Problem("", f"defaults.scaling.{k}", f"unknown field {k!r}") for k in scaling if k not in ("min", "max")]
    low, high = scaling.get("min", 1), scaling.get("max", 1)
    if type(low) is not int or low < 0:
        problems.append(Problem("", "defaults.scaling.min", "defaults.scaling.min must be a whole number, 0 or more"))
    if type(high) is not int or high < 1:
        problems.append(Problem("", "defaults.scaling.max", "defaults.scaling.max must be a whole number, 1 or more"))
    elif type(low) is int and high < low:
        problems.append(Problem("", "defaults.scaling.max", "defaults.scaling.max is below defaults.scaling.min"))
    return problems
