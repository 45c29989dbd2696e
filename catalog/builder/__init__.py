"""The catalog builder: every rule of the catalog, in pure Python.

No Django here, on purpose: forms, API serializers, services, admin and
commands all validate through ``build``, and a rule that lives in one of
them instead drifts from the others. A test imports this package with
Django unconfigured and fails if ``django`` was imported.
"""

from .catalog import Catalog, Document, Skipped, build, canonical_json, digest_of, unstorable
from .diff import diff_models
from .errors import CatalogError, Problem
from .load import load
from .rules import CLASSES, SOURCE_SCHEMES, name_problem, owner_problem, source_problem, source_shape_problem
from .schema import add_refusals, effective_class

__all__ = [
    "CLASSES", "SOURCE_SCHEMES", "Catalog", "CatalogError", "Document", "Problem", "Skipped",
    "add_refusals", "build", "canonical_json", "diff_models", "digest_of", "effective_class", "load",
    "name_problem", "owner_problem", "source_problem", "source_shape_problem", "unstorable",
]
