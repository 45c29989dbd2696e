from __future__ import annotations

from django import template

from ..forms_settings import yaml_text

register = template.Library()


@register.filter
def as_yaml(value) -> str:
    """A value as an operator would write it in the settings file."""
    return yaml_text(value)
