"""What the builder says when a catalog cannot be built."""

from __future__ import annotations

from typing import NamedTuple


class Problem(NamedTuple):
    """One thing wrong: which model, which field (dotted, list indexes as
    numbers: ``profiles.0.min_memory_gb``), and a sentence for a person.

    The field path is what lets a form put the message next to the field
    that caused it instead of at the top of the page.
    """

    model: str
    path: str
    message: str

    def __str__(self) -> str:
        where = ": ".join(part for part in (self.model, self.path) if part)
        return f"{where}: {self.message}" if where else self.message


class CatalogError(ValueError):
    """Every problem found in one build, not only the first.

    Reporting one error per attempt turns fixing a model into a loop of
    save, read, fix, save; a person wants the whole list at once.
    """

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__(self.summary())

    def summary(self) -> str:
        if not self.problems:
            return "the catalog is invalid"
        first = str(self.problems[0])
        more = len(self.problems) - 1
        return first if not more else f"{first} (and {more} more problem{'s' if more > 1 else ''})"

    def by_path(self, model: str | None = None) -> dict[str, list[str]]:
        """Messages grouped by field path, for one model or all of them."""
        out: dict[str, list[str]] = {}
        for p in self.problems:
            if model is not None and p.model != model:
                continue
            out.setdefault(p.path, []).append(p.message)
        return out
