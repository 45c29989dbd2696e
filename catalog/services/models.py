"""Runtime models: added, changed and removed without a restart.

Every operation follows the seed's order: refuse a declared name (saying
where to edit it), build the whole next catalog before anything is written,
write the row, record the catalog version and the audit event in the same
transaction. The model returned is the model as built, defaults applied:
the one that will run, not the one that was asked for.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from functools import lru_cache

from django.conf import settings as django_settings
from django.utils import timezone
from django.utils.module_loading import import_string

from .. import builder
from ..builder import CatalogError, Problem
from ..models import StoredModel
from ..selectors import InForce, build_in_force, in_force, remember_in_force
from . import audit
from .catalog import record_version
from .errors import Conflict, NotFound
from .locking import catalog_change

# The fields an update may change; name and aliases make a different model
# (replace it with add), and profiles change through ``set_resources``.
PATCHABLE = ("scaling", "class", "owner", "adapters", "source", "origin", "canary", "eval", "fallbacks")


def _declared(name: str, what: str) -> Conflict:
    # Changing a declared model here would be undone by the next settings
    # change or restart, so the cluster would disagree with its own settings
    # until then. Refusing and saying where to edit is the smaller surprise.
    return Conflict(
        f"model {name!r} is declared in the cluster settings, under models; {what} there "
        "(the Settings screen, PUT /api/v1/settings, or manage.py config edit)"
    )


def _refuse_declared(state: InForce, name: str, what: str) -> None:
    """A declared model, named or through one of its aliases, is edited in the settings."""
    model = state.catalog.resolve(name)
    declared = name if name in state.declared_names else (
        model["name"] if model is not None and model["name"] in state.declared_names else None)
    if declared is not None:
        raise _declared(declared, what)


def _not_runtime(state: InForce, name: str) -> Conflict | NotFound:
    model = state.catalog.resolve(name)
    if model is not None and "peer" in model:
        return Conflict(f"model {name!r} is federated from peer {model['peer']!r}; the peer owns it")
    if model is not None and model["name"] != name:
        return NotFound(f"{name!r} is an alias of {model['name']!r}; changes name the model itself")
    return NotFound(f"model {name!r} was not added at runtime")


@lru_cache(maxsize=4)
def _pre_add_check(path: str) -> Callable:
    return import_string(path)


def pre_add_problems(model: dict) -> list[Problem]:
    """What the configured pre-add check says against a built model."""
    check = _pre_add_check(django_settings.LLMGW_PRE_ADD_CHECK)
    return [Problem(model["name"], path, message) for path, message in check(model) or ()]


def _decode(text: str) -> dict | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _build_next(state: InForce, rows: dict[str, str], *, replace: dict[str, dict | None]) -> builder.Catalog:
    """The catalog the database would hold after a change, built strictly.

    Built from the rows that load now: a row skipped at load stays skipped
    and never blocks another model's operation.
    """
    skipped = {(s.kind, s.name) for s in state.catalog.skipped}
    # As stored text: the builder does not decode or check again a row it
    # has seen unchanged (every row but the one being changed).
    runtime: list[object] = [text for name, text in sorted(rows.items())
                             if name not in replace and ("runtime", name) not in skipped]
    runtime.extend(d for d in replace.values() if d is not None)
    federated = [m for m in state.federated if ("federated", m.get("name")) not in skipped]
    settings = state.settings
    return builder.build([*settings.declared, *federated, *runtime], engines=settings.engines,
                         defaults=settings.defaults)


def _commit(state: InForce, built: builder.Catalog, rows: dict[str, str], *, reason: str, by: str) -> InForce:
    """Record the catalog now in force, after every other row of the change
    (the cache key it is kept under covers the audit row too). When nothing
    was skipped before, the strict build is it; otherwise load again, since
    the change may have healed a skipped row (its missing fallback was just
    added)."""
    if not state.catalog.skipped:
        after = InForce(built, state.settings, state.declared_names, state.federated, rows)
    else:
        after = build_in_force(state.settings, rows)
    record_version(after.catalog, reason=reason, by=by, settings_version=state.settings.version)
    remember_in_force(after)
    return after


def _write(name: str, definition: dict, by: str) -> str:
    """Store a definition; returns the text stored."""
    text = json.dumps(definition, sort_keys=True, ensure_ascii=False)
    # update() skips auto_now, and the in-force cache keys on updated_at.
    if not StoredModel.objects.filter(name=name).update(definition=text, updated_by=by, updated_at=timezone.now()):
        StoredModel.objects.create(name=name, definition=text, created_by=by, updated_by=by)
    return text


def replace_model(*, name: str, definition: object, by: str) -> dict:
    """Replace a runtime model that exists (add's rules); the body's name,
    when given, must be the model's: a rename is an add and a remove."""
    if isinstance(definition, dict):
        if definition.get("name", name) != name:
            raise CatalogError([Problem(name, "name", "the name in the body must be the model's; to rename, "
                                                      "add the new model and remove this one")])
        definition = {**definition, "name": name}
    return add_model(definition=definition, by=by, must_exist=True)


def _named(definition: object) -> str:
    if not isinstance(definition, dict):
        raise CatalogError([Problem("", "", "a model must be an object (a mapping of fields)")])
    name = definition.get("name")
    problem = builder.name_problem(name)
    if problem:
        raise CatalogError([Problem(str(name or ""), "name", problem)])
    return name


def _checked_add(state: InForce, rows: dict[str, str], name: str, definition: dict) -> builder.Catalog:
    """The catalog adding this definition makes, or every reason it cannot."""
    if name in state.declared_names:  # an alias of one is a plain name clash (400)
        raise _declared(name, "edit it")
    try:
        built = _build_next(state, rows, replace={name: definition})
    except CatalogError as exc:
        raise CatalogError([*exc.problems, *_refusals_of(name, definition)]) from None
    model = built.resolve(name)
    refusals = [*_refusals_of(name, model), *pre_add_problems(model)]
    if refusals:
        raise CatalogError(refusals)
    return built


def preview_model(*, definition: object) -> dict:
    """The model as add would build it, with every refusal add would give;
    nothing is written (the console's inline validation)."""
    name = _named(definition)
    state = in_force()
    return _checked_add(state, dict(state.rows), name, definition).resolve(name)


def add_model(*, definition: object, by: str, must_exist: bool = False) -> dict:
    """Add a runtime model, or replace the one of the same name."""
    name = _named(definition)
    with catalog_change():
        state = in_force()
        rows = dict(state.rows)  # read under the lock: the cache key was checked after taking it
        if must_exist and name not in rows and name not in state.declared_names:
            raise _not_runtime(state, name)
        built = _checked_add(state, rows, name, definition)
        action = "model.replace" if name in rows else "model.add"
        before = _decode(rows[name]) if name in rows else None
        rows[name] = _write(name, definition, by)
        audit.record(actor=by, action=action, object_type="model", object_id=name, before=before, after=definition)
        after = _commit(state, built, rows, reason=f"{action} {name}", by=by)
        return after.catalog.resolve(name)


def _refusals_of(name: str, model: dict) -> list[Problem]:
    # Allowed to load (rows stored before the rule), refused when added now.
    return [Problem(name, path, message) for path, message in builder.add_refusals(model)]


def remove_model(*, name: str, by: str) -> None:
    """Take a runtime model out of the catalog."""
    with catalog_change():
        state = in_force()
        _refuse_declared(state, name, "remove it")
        rows = dict(state.rows)  # read under the lock: the cache key was checked after taking it
        if name not in rows:
            raise _not_runtime(state, name)
        try:
            built = _build_next(state, rows, replace={name: None})
        except CatalogError as exc:
            # Removing a model others fall back to would leave a fallback
            # pointing at nothing, discovered during the outage it was meant
            # to cover. Refuse, and name who depends on it.
            raise Conflict(_breaks(state, name, exc)) from None
        before = _decode(rows.pop(name))
        StoredModel.objects.filter(name=name).delete()
        audit.record(actor=by, action="model.remove", object_type="model", object_id=name, before=before, after=None)
        _commit(state, built, rows, reason=f"model.remove {name}", by=by)


def _breaks(state: InForce, name: str, exc: CatalogError) -> str:
    usage = state.catalog.used_by(name)
    parts = [f"{m!r} falls back to it" for m in usage["fallback_of"]]
    parts += [f"{m!r} sends it canary traffic" for m in usage["canary_of"]]
    return f"removing {name!r} would break the catalog: " + ("; ".join(parts) if parts else exc.summary())


def _change(name: str, *, by: str, action: str, what: str,
            change: Callable[[dict, dict | None], None], check_weights: bool = False) -> dict:
    """Change one runtime model's definition, built before it is written."""
    with catalog_change():
        state = in_force()
        _refuse_declared(state, name, what)
        rows = dict(state.rows)  # read under the lock: the cache key was checked after taking it
        if name not in rows:
            raise _not_runtime(state, name)
        before = _decode(rows[name])
        if before is None:
            raise Conflict(f"the stored definition of {name!r} does not decode; replace it whole (PUT) instead")
        definition = copy.deepcopy(before)
        change(definition, state.catalog.resolve(name))
        built = _build_next(state, rows, replace={name: definition})
        model = built.resolve(name)
        if check_weights:
            problems = pre_add_problems(model)
            if problems:
                raise CatalogError(problems)
        rows[name] = _write(name, definition, by)
        audit.record(actor=by, action=action, object_type="model", object_id=name, before=before, after=definition)
        after = _commit(state, built, rows, reason=f"{action} {name}", by=by)
        return after.catalog.resolve(name)


def _set(field: str, value) -> Callable[[dict, dict | None], None]:
    def change(definition: dict, _built: dict | None) -> None:
        if value is None and field in ("canary", "eval", "origin"):
            definition.pop(field, None)
        else:
            definition[field] = copy.deepcopy(value)
    return change


def update_model(*, name: str, changes: object, by: str) -> dict:
    """Several fields of a runtime model in one rebuild (PATCH)."""
    if not isinstance(changes, dict):
        raise CatalogError([Problem(name, "", "a change must be an object of fields")])
    unknown = [Problem(name, k, f"{k!r} cannot be changed here (one of: {', '.join(PATCHABLE)})")
               for k in changes if k not in PATCHABLE]
    if unknown:
        raise CatalogError(unknown)

    def change(definition: dict, built: dict | None) -> None:
        for field_name, value in changes.items():
            _set(field_name, value)(definition, built)

    touches_weights = "source" in changes or "adapters" in changes
    return _change(name, by=by, action="model.update", what="change it", change=change, check_weights=touches_weights)


def scale_model(*, name: str, min: int, max: int, by: str) -> dict:
    return _change(name, by=by, action="model.scale", what="change its scaling",
                   change=_set("scaling", {"min": min, "max": max}))


def set_resources(*, name: str, profile: str | None, min_memory_gb: object, cpu_cores: object, by: str) -> dict:
    """A profile's (or, with no profile named, every profile's) host memory and CPU cores."""
    problems = [Problem(name, key, f"{key} must be a whole number, 0 or more")
                for key, value in (("min_memory_gb", min_memory_gb), ("cpu_cores", cpu_cores))
                if type(value) is not int or value < 0]
    if problems:
        raise CatalogError(problems)

    def change(definition: dict, built: dict | None) -> None:
        profiles = definition.get("profiles") or copy.deepcopy((built or {}).get("profiles") or [])
        matched = [p for p in profiles if isinstance(p, dict) and (not profile or p.get("name") == profile)]
        if not matched:
            raise CatalogError([Problem(name, "profile", f"model {name!r} has no profile {profile!r}")])
        for p in matched:
            p["min_memory_gb"], p["cpu_cores"] = min_memory_gb, cpu_cores
        definition["profiles"] = profiles

    return _change(name, by=by, action="model.resources", what="change its resources", change=change)


def set_class(*, name: str, cls: str, by: str) -> dict:
    return _change(name, by=by, action="model.set_class", what="change its class", change=_set("class", cls))


def set_owner(*, name: str, owner: str, by: str) -> dict:
    return _change(name, by=by, action="model.set_owner", what="change its owner", change=_set("owner", owner))


def set_adapters(*, name: str, adapters: list, by: str) -> dict:
    return _change(name, by=by, action="model.set_adapters", what="change its adapters",
                   change=_set("adapters", adapters), check_weights=True)


def set_source(*, name: str, source: str, origin: dict | None, by: str) -> dict:
    def change(definition: dict, built: dict | None) -> None:
        _set("source", source)(definition, built)
        _set("origin", origin)(definition, built)

    return _change(name, by=by, action="model.set_source", what="change its source", change=change,
                   check_weights=True)


def set_canary(*, name: str, canary: dict | None, by: str) -> dict:
    return _change(name, by=by, action="model.set_canary", what="set its canary", change=_set("canary", canary))


def set_eval(*, name: str, gate: dict | None, by: str) -> dict:
    return _change(name, by=by, action="model.set_eval", what="set its eval gate", change=_set("eval", gate))


def set_fallbacks(*, name: str, fallbacks: list, by: str) -> dict:
    return _change(name, by=by, action="model.set_fallbacks", what="change its fallbacks",
                   change=_set("fallbacks", fallbacks))


def set_origin(*, name: str, origin: dict | None, by: str = "system") -> dict | None:
    """Record where a model's weights came from without changing them.

    A declared model is left alone, silently: its origin is worked out
    again when it is needed, and the settings are not the place for it.
    """
    if name in in_force().declared_names:
        return None
    return _change(name, by=by, action="model.set_origin", what="record its origin", change=_set("origin", origin))
