"""The only code that writes. Doors (views, API, admin, commands, tasks)
validate the shape of what they were given and call one of these."""

from .errors import Conflict, NotFound, Refusal

__all__ = ["Conflict", "NotFound", "Refusal"]
