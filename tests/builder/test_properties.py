"""Properties of the builder over generated input (QUALITY R6).

1. Whatever it is handed, ``build`` answers a catalog or ``CatalogError``.
2. Building the models of a built catalog gives the same catalog.
3. The digest does not depend on the order the models come in.
4. ``load`` never raises over arbitrary stored rows when the declared
   models are valid, and accounts for every row: loaded or skipped.
"""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.builder import CatalogError, build, load

ENGINES = ("vllm", "llama.cpp", "sglang")
DEFAULTS = {"engine": "vllm", "scaling": {"min": 1, "max": 2}}
DECLARED = [
    {"name": "declared/llama", "aliases": ["llama"], "source": "hf://meta-llama/Llama-3.1-8B-Instruct"},
    {"name": "declared-cpu", "engine": "llama.cpp", "source": "file:///models/phi.gguf",
     "profiles": [{"name": "cpu", "gpus": 0, "min_memory_gb": 16}]},
]
DECLARED_NAMES = {"declared/llama", "llama", "declared-cpu"}
FEDERATED = [{"name": "peer-a/m", "peer": "peer-a"}, {"name": "peer-b/x", "aliases": ["peer-b/y"], "peer": "peer-b"}]

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

FIELDS = ["name", "aliases", "description", "engine", "source", "origin", "adapters", "profiles", "scaling",
          "class", "owner", "canary", "eval", "fallbacks", "peer"]
NESTED = ["repo", "revision", "digest", "fetched_at", "gpus", "gpu_type", "gpu_memory_gb", "min_memory_gb",
          "cpu_cores", "min", "max", "model", "percent", "suite", "min_score", "source"]

# --- strategies ----------------------------------------------------------------------

scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12))
keys = st.sampled_from(FIELDS + NESTED) | st.text(max_size=8)
json_like = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5),
    max_leaves=25,
)

# Each segment starts with a letter or digit: never empty, ".", ".." or "-".
# Settings are YAML: dates, timestamps, binary and non-string keys reach the builder too.
yaml_scalars = scalars | st.dates() | st.datetimes() | st.binary(max_size=4)
yaml_like = st.recursive(
    yaml_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys | st.integers(), children, max_size=5),
    max_leaves=25,
)

segment = st.builds(str.__add__, st.sampled_from("abcxyz019"), st.text(alphabet="abcz09._:-", max_size=4))
name_strategy = st.builds(
    lambda first, rest: "/".join([first, *rest]),
    st.builds(str.__add__, st.sampled_from("abcdefxyz"), st.text(alphabet="abcz09_", max_size=5)),
    st.lists(segment, max_size=2),
)
sources = st.sampled_from([
    "hf://org/model", "hf://model", "s3://bucket/key", "gs://bucket/a/b", "oci://registry.io/repo:tag",
    "file:///models/x.gguf", "https://weights.example.com/x",
])
# Text a valid model may hold: any Unicode that can be stored (no NUL, no
# lone surrogate; those are refused, which the arbitrary-input tests cover).
storable = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
optional_text = st.none() | st.text(storable, max_size=20)


@st.composite
def profiles(draw):
    names = draw(st.lists(st.sampled_from(["default", "a100", "h100", "cpu", "ëxotic"]), max_size=3, unique=True))
    out = []
    for n in names:
        profile = {"name": n}
        for key in ("gpus", "gpu_memory_gb", "min_memory_gb", "cpu_cores"):
            if draw(st.booleans()):
                profile[key] = draw(st.integers(min_value=0, max_value=2**31 - 1))
        if draw(st.booleans()):
            profile["gpu_type"] = draw(st.text(storable, max_size=8))
        out.append(profile)
    return out


@st.composite
def local_fields(draw):
    fields = {"source": draw(sources)}
    if draw(st.booleans()):
        fields["description"] = draw(st.text(storable, max_size=40))
    if draw(st.booleans()):
        fields["engine"] = draw(st.sampled_from(("", *ENGINES)))
    if draw(st.booleans()):
        fields["origin"] = draw(st.none() | st.fixed_dictionaries(
            {}, optional={k: st.text(storable, max_size=10) for k in ("repo", "revision", "digest", "fetched_at")}))
    if draw(st.booleans()):
        adapter_names = draw(st.lists(name_strategy, max_size=3, unique=True))
        fields["adapters"] = [{"name": n, "source": draw(sources)} for n in adapter_names]
    if draw(st.booleans()):
        fields["profiles"] = draw(profiles())
    if draw(st.booleans()):
        low = draw(st.integers(min_value=0, max_value=5))
        scaling = {"min": low, "max": draw(st.integers(min_value=max(low, 1), max_value=9))}
        fields["scaling"] = draw(st.sampled_from([scaling, {"max": scaling["max"] + 1}, {"min": 0}, {}]))
    if draw(st.booleans()):
        fields["class"] = draw(st.sampled_from(["", "critical", "standard", "opportunistic"]))
    if draw(st.booleans()):
        fields["owner"] = draw(st.sampled_from(["", "org:acme", "team:ml-infra", "project:chat.v2"]))
    if draw(st.booleans()):
        fields["eval"] = {"suite": draw(st.sampled_from(["mmlu", "gsm8k", "ünï suite"])),
                          "min_score": draw(st.floats(min_value=0, max_value=1) | st.sampled_from([0, 1]))}
    return fields


@st.composite
def valid_models(draw):
    """A list of models that builds: unique names and aliases, fallbacks
    that only point forward (no cycle), canaries anywhere but self."""
    labels = draw(st.lists(name_strategy, min_size=1, max_size=7, unique=True))
    n = draw(st.integers(min_value=1, max_value=len(labels)))
    names, spare = labels[:n], labels[n:]
    aliases = {name: [] for name in names}
    for alias in spare:
        aliases[draw(st.sampled_from(names))].append(alias)
    federated = [{"name": f"peer-{p}/{m}", "peer": f"peer-{p}"}
                 for p, m in draw(st.lists(st.tuples(st.sampled_from("abc"), segment), max_size=3, unique=True))]
    models = []
    for i, name in enumerate(names):
        model = {"name": name, **draw(local_fields())}
        if aliases[name]:
            model["aliases"] = aliases[name]
        later = [[m, *aliases[m]] for m in names[i + 1:]] + [[f["name"]] for f in federated]
        if later and draw(st.booleans()):
            targets = draw(st.lists(st.sampled_from(later), max_size=3, unique_by=lambda t: t[0]))
            model["fallbacks"] = [draw(st.sampled_from(t)) for t in targets]
        others = [m for m in names if m != name] + [f["name"] for f in federated]
        if others and draw(st.booleans()):
            model["canary"] = {"model": draw(st.sampled_from(others)), "percent": draw(st.integers(1, 99))}
        models.append(model)
    return draw(st.permutations(models + federated))


@st.composite
def near_valid_models(draw):
    """Valid models with one field of one model replaced by anything."""
    models = [dict(m) for m in draw(valid_models())]
    target = draw(st.sampled_from(models))
    field = draw(st.sampled_from(FIELDS + ["unknown"]))
    how = draw(st.sampled_from(["replace", "delete", "nested"]))
    if how == "delete":
        target.pop(field, None)
    elif how == "nested" and isinstance(target.get(field), (dict, list)) and target[field]:
        value = target[field]
        inner = value[0] if isinstance(value, list) else value
        if isinstance(inner, dict):
            inner = dict(inner)
            inner[draw(st.sampled_from(NESTED + ["unknown"]))] = draw(json_like)
            target[field] = [inner, *value[1:]] if isinstance(value, list) else inner
        else:
            target[field] = [draw(json_like), *value[1:]] if isinstance(value, list) else draw(json_like)
    else:
        target[field] = draw(json_like)
    return models


def build_or_error(models):
    try:
        catalog = build(models, engines=ENGINES, defaults=DEFAULTS)
    except CatalogError as exc:
        assert exc.problems, "a CatalogError names at least one problem"
        return None
    catalog.document()  # a catalog that builds always has a document
    return catalog


# --- 1. build answers a catalog or CatalogError, nothing else -----------------------

@PROPERTY
@given(st.lists(json_like, max_size=5))
def test_build_of_arbitrary_json_raises_nothing_but_catalog_error(models):
    build_or_error(models)


@settings(PROPERTY, max_examples=100)
@given(st.lists(st.fixed_dictionaries({}, optional={f: yaml_like for f in FIELDS}) | yaml_like, max_size=4))
def test_build_of_arbitrary_yaml_values_raises_nothing_but_catalog_error(models):
    build_or_error(models)


@PROPERTY
@given(near_valid_models())
def test_build_of_a_model_with_one_field_mutated_raises_nothing_but_catalog_error(models):
    build_or_error(models)


# --- 2. idempotent -------------------------------------------------------------------

@PROPERTY
@given(valid_models())
def test_building_the_models_of_a_built_catalog_gives_the_same_catalog(models):
    first = build(models, engines=ENGINES, defaults=DEFAULTS)
    again = build(first.models(), engines=ENGINES, defaults=DEFAULTS)
    assert again.models() == first.models()
    assert again.document() == first.document()


@PROPERTY
@given(near_valid_models())
def test_whatever_builds_rebuilds_to_itself(models):
    first = build_or_error(models)
    if first is not None:
        assert build(first.models(), engines=ENGINES, defaults=DEFAULTS).digest == first.digest


# --- 3. order does not matter --------------------------------------------------------

@PROPERTY
@given(valid_models(), st.randoms(use_true_random=False))
def test_the_digest_does_not_depend_on_the_order_of_the_models(models, rnd):
    shuffled = models[:]
    rnd.shuffle(shuffled)
    assert (build(shuffled, engines=ENGINES, defaults=DEFAULTS).digest
            == build(models, engines=ENGINES, defaults=DEFAULTS).digest)


# --- 4. load never raises and accounts for every row ---------------------------------

row_names = (name_strategy | st.sampled_from(sorted(DECLARED_NAMES) + ["peer-a/m", "a b", "/x", "a/-/b"])
             | st.text(max_size=6))


@st.composite
def stored_rows(draw):
    names = draw(st.lists(row_names, max_size=8, unique=True))
    targets = names + sorted(DECLARED_NAMES) + ["peer-a/m", "peer-b/y", "ghost"]
    rows = []
    for name in names:
        kind = draw(st.sampled_from(["model", "model", "model", "mutated", "json", "text", "other-name"]))
        if kind in ("model", "mutated"):
            model = {"name": name, **draw(local_fields())}
            if draw(st.booleans()):
                model["fallbacks"] = draw(st.lists(st.sampled_from(targets), max_size=3))
            if draw(st.booleans()):
                model["canary"] = {"model": draw(st.sampled_from(targets)), "percent": draw(st.integers(0, 100))}
            if kind == "mutated":
                model[draw(st.sampled_from(FIELDS + ["unknown"]))] = draw(json_like)
            text = json.dumps(model)
        elif kind == "json":
            text = json.dumps(draw(json_like))
        elif kind == "other-name":
            text = json.dumps({"name": draw(name_strategy), "source": "hf://org/x"})
        else:
            text = draw(st.text(max_size=30))
        rows.append((name, text))
    return rows


@PROPERTY
@given(stored_rows(), st.sampled_from([[], FEDERATED]))
def test_load_never_raises_and_every_row_is_loaded_or_skipped(rows, federated):
    catalog = load(DECLARED, federated, rows, engines=ENGINES, defaults=DEFAULTS)
    loaded = {m["name"] for m in catalog.models() if "peer" not in m} - {"declared/llama", "declared-cpu"}
    skipped = [s.name for s in catalog.skipped if s.kind == "runtime"]
    assert len(skipped) == len(set(skipped)), "a row is skipped once"
    row_names_ = {name for name, _ in rows}
    assert loaded <= row_names_
    assert set(skipped) <= row_names_, "a skipped row is listed under its own name"
    assert loaded.isdisjoint(skipped)
    assert loaded | set(skipped) == row_names_
    # What load puts in force is itself a valid catalog.
    assert build(catalog.models(), engines=ENGINES, defaults=DEFAULTS).digest == catalog.digest
