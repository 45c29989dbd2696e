"""What every benchmark shares: timing statistics, the output format, and a
deterministic synthetic catalog.

Benchmarks print one JSON line per figure on stdout and nothing else
(progress goes to stderr), so `make bench | jq` always works:
``{"bench": "B1", "figure": "build_us_per_model", "n": 10000, "value": 31.2}``.

The generated catalog is shaped like a real one, because a benchmark of
models with no aliases, fallbacks or canaries would time a builder that
skips most of its work. Names sort in creation order
(``org003/model-000812``), and every fallback and canary names an earlier
model: that is the order in which an operator could have added them, and
the order in which the seed's row-by-row load accepts them.
"""

from __future__ import annotations

import gc
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

ENGINES = ("vllm", "sglang", "llama.cpp")
DEFAULTS = {"engine": "vllm", "scaling": {"min": 1, "max": 2}}
ORG_SIZE = 250  # models per org: 200 orgs at 50k
CHAIN = 5  # models per fallback chain: each falls back to 1-2 earlier ones
DECLARED_COUNT = 50


# --- Output and statistics ---------------------------------------------------

def emit(bench: str, figure: str, n: int | None, value: float) -> None:
    """One figure, one JSON line on stdout."""
    value = round(value, 3) if isinstance(value, float) and math.isfinite(value) else value
    print(json.dumps({"bench": bench, "figure": figure, "n": n, "value": value}), flush=True)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        raise ValueError("median of nothing")
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def percentile(values: list[float], pct: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of nothing")
    rank = (len(ordered) - 1) * pct / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    """Seconds one call took, and what it returned. A collection first, so
    garbage left by the previous run is not charged to this one."""
    gc.collect()
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def forget_builder_memo() -> None:
    """Empty the builder's memo of stored texts already checked and of
    canonical bytes (catalog/builder/memo.py), so a timed run is a cold
    one: the first load after a start, or after a settings change."""
    try:
        from catalog.builder import memo
    except ImportError:  # a builder without a memo has nothing to forget
        return
    memo.clear()


def runs_for(n: int, *, small: int = 7, large: int = 3, threshold: int = 20_000) -> int:
    return small if n < threshold else large


# --- The synthetic catalog ---------------------------------------------------

def model_name(i: int) -> str:
    return f"org{i // ORG_SIZE:03d}/model-{i:06d}"


def short_alias(i: int) -> str:
    return f"m{i:06d}"


def declared_models(count: int = DECLARED_COUNT) -> list[dict]:
    """The cluster settings' models: a reviewed production set."""
    return [
        {
            "name": f"declared/model-{j:02d}",
            "aliases": [f"declared-{j:02d}"],
            "description": "declared in the cluster settings",
            "source": f"hf://declared/model-{j:02d}",
            "profiles": [{"name": "h100", "gpus": 2, "gpu_type": "H100", "gpu_memory_gb": 80,
                          "min_memory_gb": 128}],
            "scaling": {"min": 2, "max": 4},
            "class": "critical",
            "owner": "org:platform",
        }
        for j in range(count)
    ]


def _owner(rng: random.Random, i: int) -> str:
    roll = rng.random()
    if roll < 0.4:
        return ""
    if roll < 0.6:
        return "org:acme"
    if roll < 0.8:
        return f"team:search-{i % 20}"
    return f"project:p-{i % 100}"


def generate_model(i: int, rng: random.Random, declared: list[dict] = ()) -> dict:
    """Model ``i`` of a synthetic catalog; it references only models < i."""
    name = model_name(i)
    org = name.split("/", 1)[0]
    model: dict = {"name": name, "aliases": [short_alias(i)]}
    if rng.random() < 0.4:
        model["aliases"].append(f"{name}:latest")
    model["description"] = f"synthetic model {i} for benchmarks"
    if rng.random() < 0.7:
        model["engine"] = rng.choice(ENGINES)
    roll = rng.random()
    if roll < 0.1:
        model["source"] = f"s3://bench-weights/{org}/model-{i:06d}"
    elif roll < 0.2:
        model["source"] = f"hf://base/llama-{i % 50}"  # shared base weights
    else:
        model["source"] = f"hf://{org}/model-{i:06d}"
    if rng.random() < 0.2:
        model["origin"] = {"repo": f"{org}/model-{i:06d}", "revision": f"{rng.getrandbits(40):010x}"}
    if rng.random() < 0.2:
        model["adapters"] = [{"name": f"lora-{a}", "source": f"hf://{org}/model-{i:06d}-lora-{a}"}
                             for a in range(rng.randint(1, 2))]
    profiles = [{"name": "a100", "gpus": rng.choice((1, 1, 2, 4)), "gpu_type": "A100",
                 "gpu_memory_gb": 80, "min_memory_gb": 32}]
    if rng.random() < 0.3:
        profiles.append({"name": "cpu", "gpus": 0, "min_memory_gb": 64, "cpu_cores": 16})
    model["profiles"] = profiles
    if rng.random() < 0.5:
        low = rng.choice((0, 1))
        model["scaling"] = {"min": low, "max": low + rng.randint(1, 3)}
    model["class"] = rng.choice(("", "", "critical", "standard", "opportunistic"))
    model["owner"] = _owner(rng, i)
    if rng.random() < 0.3:
        model["eval"] = {"suite": rng.choice(("mmlu-lite", "helpfulness", "code-eval")),
                         "min_score": round(rng.uniform(0.5, 0.9), 2)}
    # Fallback chains of CHAIN models: each but the chain's first falls back
    # to the one before it, half of them to the one before that as well;
    # by name or by alias, as people write them.
    pos = i % CHAIN
    fallbacks = []
    for back in (1, 2):
        if pos >= back and (back == 1 or rng.random() < 0.5):
            j = i - back
            fallbacks.append(model_name(j) if rng.random() < 0.6 else short_alias(j))
    if declared and rng.random() < 0.05:
        fallbacks.append(rng.choice(declared)["aliases"][0])
    if fallbacks:
        model["fallbacks"] = fallbacks
    if i > 0 and rng.random() < 0.05:
        model["canary"] = {"model": model_name(rng.randrange(max(0, i - 100), i)), "percent": rng.randint(1, 20)}
    return model


def generate_models(n: int, *, seed: int = 1, declared: list[dict] = ()) -> list[dict]:
    rng = random.Random(seed)
    return [generate_model(i, rng, declared) for i in range(n)]


def stored_text(definition: object) -> str:
    """A definition as StoredModel keeps it (catalog/services/models.py)."""
    return json.dumps(definition, sort_keys=True, ensure_ascii=False)


# --- Stored rows with some that must be skipped ------------------------------

INVALID_KINDS = ("declared-name", "declared-alias", "missing-fallback", "bad-field", "undecodable",
                 "runtime-alias")

_BAD_FIELDS: tuple[tuple[str, object], ...] = (
    ("engine", "trt-llm"),
    ("scaling", {"min": 3, "max": 1}),
    ("gpu", 1),  # unknown field
    ("source", "ftp://mirror/model"),
    ("canary", {"model": "m000000", "percent": 0}),
    ("eval", {"suite": "mmlu-lite", "min_score": 1.5}),
    ("owner", "someone"),
    ("class", "gold"),
)


def stored_rows_with_invalid(n: int, *, fraction: float = 0.02, seed: int = 2,
                             declared: list[dict] | None = None) -> tuple[list[dict], list[tuple[str, str]], dict]:
    """(declared models, stored rows as (name, JSON text), invalid row -> kind).

    ``fraction`` of the rows are invalid, the kinds taken in turn: a
    declared model's name or alias, a fallback that names nothing, a bad
    field, a definition that does not decode, an alias another runtime
    model already has. The rows that fall back to (or canary) an invalid
    one come on top: they are valid alone and must be skipped with it.

    A contested alias is taken from any earlier row, which may itself be
    invalid or skipped by cascade: the later row must then load (a clash
    with a skipped model alone does not skip), as in the seed's row-by-row
    check.
    """
    declared = declared_models() if declared is None else declared
    rng = random.Random(seed)
    models = generate_models(n, seed=seed, declared=declared)
    count = max(1, round(n * fraction))
    chosen = sorted(rng.sample(range(1, n), count))
    invalid: dict[str, str] = {}
    texts: dict[int, str] = {}
    used_declared = 0
    for k, i in enumerate(chosen):
        kind = INVALID_KINDS[k % len(INVALID_KINDS)]
        model = models[i]
        if kind == "declared-name":
            # Names first, then the declared aliases as names: each stored
            # row needs its own name (the column is unique).
            d = declared[used_declared % len(declared)]
            model["name"] = d["name"] if used_declared < len(declared) else d["aliases"][0]
            used_declared += 1
        elif kind == "declared-alias":
            model["aliases"].append(rng.choice(declared)["aliases"][0])
        elif kind == "missing-fallback":
            model.setdefault("fallbacks", []).append(f"ghost/model-{i:06d}")
        elif kind == "bad-field":
            field, value = _BAD_FIELDS[(k // len(INVALID_KINDS)) % len(_BAD_FIELDS)]
            model[field] = value
        elif kind == "undecodable":
            texts[i] = stored_text(model)[:-7]
        elif kind == "runtime-alias":
            model["aliases"].append(short_alias(rng.randrange(max(0, i - 50), i)))
        invalid[model["name"]] = kind
    rows = [(m["name"], texts.get(i) or stored_text(m)) for i, m in enumerate(models)]
    rows.sort(key=lambda row: row[0])  # as stored_rows() reads them: by name
    return declared, rows, invalid


# --- Benchmarks on the real services -----------------------------------------
# B3 keeps its own copies of these; B4-B6 share them. Each benchmark has a
# database of its own (dropped and created again at every run), so two
# benchmarks run side by side never drop each other's.

PG_SERVER = "postgres://postgres@127.0.0.1:5432"
REDIS_SERVER = "redis://127.0.0.1:6379"


def postgres_answers(server: str = PG_SERVER) -> bool:
    import psycopg

    try:
        with psycopg.connect(f"{server}/postgres", connect_timeout=2):
            return True
    except psycopg.Error:
        return False


def redis_answers(url: str) -> bool:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


def flush_redis(url: str) -> None:
    """Empty one Redis database: nothing queued by an earlier run."""
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
    try:
        client.flushdb()
    finally:
        client.close()


def recreate_database(name: str, server: str = PG_SERVER) -> str:
    """Drop and create database ``name``; returns its URL."""
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    return f"{server}/{name}"


def added_model(prefix: str, n: int, k: int, fallbacks: list[str]) -> dict:
    """A valid model an operator might add while N are in force: one GPU
    profile, scaling to zero, falling back to seeded models."""
    short = f"{prefix}-{n}-{k:03d}"
    return {
        "name": f"bench/{short}",
        "aliases": [short],
        "description": f"added by the {prefix} benchmark",
        "source": f"hf://bench/{short}",
        "profiles": [{"name": "a100", "gpus": 1, "gpu_type": "A100", "gpu_memory_gb": 80, "min_memory_gb": 32}],
        "scaling": {"min": 0, "max": 2},
        "owner": "team:bench",
        "fallbacks": fallbacks,
    }


def write_settings_file(directory: str) -> str:
    """The cluster settings every service benchmark starts from: the
    synthetic engines, defaults and declared models."""
    import yaml

    path = Path(directory) / "llmgw-bench.yaml"
    path.write_text(yaml.safe_dump({
        "cluster_name": "bench",
        "engines": list(ENGINES),
        "defaults": DEFAULTS,
        "models": declared_models(),
    }), encoding="utf-8")
    return str(path)


def setup_django(env: dict[str, str]) -> None:
    """Put ``env`` in os.environ (settings.py reads it once), start Django
    and migrate. Subprocesses started afterwards with os.environ inherit
    the same database, settings file and secret key."""
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "llmgw_console.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def seed_runtime_models(n: int, *, seed: int = 3) -> None:
    """Exactly n runtime models in force, none skipped, recorded as a new
    catalog version. Rows are bulk-created (adding thousands through the
    service would take longer than the benchmark), then the catalog is
    rebuilt from them as after a start."""
    from catalog import selectors
    from catalog.models import StoredModel
    from catalog.services.catalog import refresh_catalog

    StoredModel.objects.all().delete()
    models = generate_models(n, seed=seed, declared=declared_models())
    StoredModel.objects.bulk_create(
        [StoredModel(name=m["name"], definition=stored_text(m), created_by="bench", updated_by="bench")
         for m in models],
        batch_size=1000,
    )
    refresh_catalog(reason="bench", by="bench")
    state = selectors.in_force()
    runtime = sum(1 for m in state.catalog.models() if state.kind(m) == selectors.RUNTIME)
    if runtime != n or state.catalog.skipped:
        raise SystemExit(f"seeding {n} models put {runtime} in force, {len(state.catalog.skipped)} skipped")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process_group(process, *, grace: float = 10.0) -> None:
    """SIGTERM the process group a benchmark started (start_new_session=True),
    then SIGKILL it if it has not exited within ``grace`` seconds."""
    import signal
    import subprocess

    if process is None or process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=grace)
    except ProcessLookupError:
        pass


def top_functions(profiler, *, count: int = 25, restrictions: tuple = ()) -> str:
    """cProfile's top functions, by cumulative and by own time."""
    import io
    import pstats

    out = io.StringIO()
    for title, order in (("top by cumulative time", "cumulative"), ("top by own time", "tottime")):
        out.write(f"\n== {title} ==\n")
        pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(*restrictions, count)
    return out.getvalue()
