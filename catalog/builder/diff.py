"""Model-level differences between two catalogs (lists of built models)."""

from __future__ import annotations


def diff_models(old: list[dict], new: list[dict]) -> dict:
    """``{"added", "removed", "changed": [{"name", "fields"}]}``, sorted by name."""
    before = {m["name"]: m for m in old}
    after = {m["name"]: m for m in new}
    changed = []
    for name in sorted(before.keys() & after.keys()):
        a, b = before[name], after[name]
        fields = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        if fields:
            changed.append({"name": name, "fields": fields})
    return {
        "added": sorted(after.keys() - before.keys()),
        "removed": sorted(before.keys() - after.keys()),
        "changed": changed,
    }
