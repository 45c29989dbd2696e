from __future__ import annotations

import json

import yaml
from django import template

register = template.Library()


@register.filter
def as_yaml(value) -> str:
    """A value as an operator would write it in the settings file."""
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True).strip()


@register.filter
def as_json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


@register.filter
def get(mapping, key):
    return mapping.get(key) if isinstance(mapping, dict) else None
