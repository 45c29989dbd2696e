"""The refusals a service can give besides the builder's CatalogError."""


class Refusal(Exception):
    """A request the service will not carry out, with a sentence saying why."""

    def __init__(self, message: str):
        self.message = message
        super().__init__(message)


class Conflict(Refusal):
    """The state forbids it: a declared model, a removal others depend on,
    a write based on a version that is no longer the newest."""


class NotFound(Refusal):
    """There is no such thing to change."""
