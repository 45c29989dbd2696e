"""The default pre-add check (settings.LLMGW_PRE_ADD_CHECK).

Run before a model is added, to refuse weights the engine cannot load,
which otherwise are placed and then fail on every node they are tried on.
A deployment can name its own callable: it takes the model as built and
returns (field path, message) pairs, none when the model may be added.
"""

from __future__ import annotations

from collections.abc import Iterator

from .builder import source_shape_problem


def check_weights_loadable(model: dict) -> Iterator[tuple[str, str]]:
    """Every weights URI of the model has the shape its scheme needs."""
    problem = source_shape_problem(model.get("source") or "")
    if problem:
        yield "source", problem
    for i, adapter in enumerate(model.get("adapters") or ()):
        problem = source_shape_problem(adapter.get("source") or "")
        if problem:
            yield f"adapters.{i}.source", problem
