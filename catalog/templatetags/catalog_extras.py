from __future__ import annotations

import json

from django import template

from ..forms_settings import yaml_text

register = template.Library()


@register.filter
def as_yaml(value) -> str:
    """A value as an operator would write it in the settings file."""
    return yaml_text(value)


@register.filter
def as_json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


@register.filter
def get(mapping, key):
    return mapping.get(key) if isinstance(mapping, dict) else None
