"""Read configuration from the environment, failing loudly on a bad value.

A typo such as ``DJANGO_DEBUG=ture`` must stop the process at start with the
variable's name, not silently fall back to a default: a console that quietly
runs with debug on (or off) in the wrong place is worse than one that refuses
to start.
"""

import os

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _raw(name):
    return os.environ.get(name)


def env_str(name, default=""):
    """The variable's value, or ``default`` when unset or empty."""
    value = _raw(name)
    if value is None or value == "":
        return default
    return value


def env_bool(name, default=False):
    """1/true/yes/on or 0/false/no/off (any case); anything else is an error."""
    value = _raw(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name}={value!r} is not a boolean: use 1/true/yes/on or 0/false/no/off"
    )


def env_int(name, default, minimum=None):
    """An integer, at least ``minimum`` when given; unset or empty gives ``default``."""
    value = _raw(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} is below the minimum of {minimum}")
    return number


def env_list(name, default):
    """A comma-separated list; blanks around items are dropped.

    ``default`` may be a list or a comma-separated string.
    """
    value = _raw(name)
    if value is None:
        value = default
    if isinstance(value, (list, tuple)):
        return list(value)
    if not isinstance(value, str):
        raise ImproperlyConfigured(f"{name} default must be a list or a string")
    return [item.strip() for item in value.split(",") if item.strip()]
