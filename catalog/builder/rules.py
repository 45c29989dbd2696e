"""The small rules the schema is made of: names, owners, weights URIs.

Kept apart from the model schema because settings validation and the
pre-add check use them too, and a rule written twice drifts.
"""

from __future__ import annotations

import re

NAME_MAX = 200
_NAME_CHARS = re.compile(r"[A-Za-z0-9._:/-]{1,%d}" % NAME_MAX)
# A path segment that would mean something else in a URL or a file path.
# `-` is reserved so that URLs can use `/-/` to end a name
# (`/models/org/name/-/resources`) without ever being ambiguous.
_BAD_SEGMENTS = frozenset({"", ".", "..", "-"})

_OWNER = re.compile(r"(org|team|project):[A-Za-z0-9._-]+")
# A cluster's name, this one's or a peer's: it prefixes the peer's models
# (PEER/MODEL), so it must be a plain name segment.
CLUSTER_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
# Where the console reaches a gateway or a peer.
HTTP_URL = re.compile(r"https?://(\[[0-9A-Fa-f:]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?(/[^\s]*)?")

CLASSES = ("critical", "standard", "opportunistic")

# Where weights can come from. Anything else is a typo or a scheme no engine
# here can fetch, discovered only when a replica fails to start.
SOURCE_SCHEMES = ("hf", "s3", "gs", "oci", "file", "https")
_SOURCE = re.compile(r"(?P<scheme>[a-z0-9]+)://(?P<rest>.*)", re.S)
_SEGMENT = re.compile(r"[A-Za-z0-9._-]+")
_BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]")
_HOST = re.compile(r"[A-Za-z0-9.-]+(:[0-9]{1,5})?")
_OCI_REF = re.compile(r"[a-z0-9._/-]+(:[A-Za-z0-9._-]{1,128}|@sha256:[a-f0-9]{64})?")


def whole_number(text: str) -> int | None:
    """A number typed as text (a URL parameter, a dotted key's index): ASCII
    digits only — '²' is a digit to Python, and int() refuses it."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None


def name_problem(value: object, what: str = "name") -> str | None:
    """Why ``value`` cannot be a model name (or alias), or None."""
    if not isinstance(value, str):
        return f"{what} must be a string"
    if not value:
        return f"{what} is required"
    if len(value) > NAME_MAX:
        return f"{what} is longer than {NAME_MAX} characters"
    if not _NAME_CHARS.fullmatch(value):
        return f"{what} {value!r} may only use letters, digits and . _ : / -"
    if value.startswith("/") or value.endswith("/"):
        return f"{what} {value!r} cannot start or end with '/'"
    if any(seg in _BAD_SEGMENTS for seg in value.split("/")):
        return f"{what} {value!r} has an empty, '.', '..' or '-' path segment"
    return None


def owner_problem(value: object) -> str | None:
    if not isinstance(value, str):
        return "owner must be a string"
    if value and not _OWNER.fullmatch(value):
        return f"owner {value!r} must be empty (shared) or org:ID, team:ID or project:ID"
    return None


def source_problem(value: object) -> str | None:
    """Why ``value`` is not a weights URI the schema accepts, or None.

    Only the scheme and that something follows it: the stricter shape of
    each scheme is ``source_shape_problem``, checked before a model is added
    so that rows stored before a shape rule existed still load.
    """
    if not isinstance(value, str):
        return "source must be a string"
    if not value:
        return "source is required"
    match = _SOURCE.fullmatch(value)
    if not match or match["scheme"] not in SOURCE_SCHEMES:
        schemes = ", ".join(f"{s}://" for s in SOURCE_SCHEMES)
        return f"source {value!r} must be a URI starting with one of {schemes}"
    rest = match["rest"]
    if not rest.strip("/") or any(c.isspace() for c in value):
        return f"source {value!r} names no location (or contains spaces)"
    return None


def source_shape_problem(value: str) -> str | None:
    """Why an engine could not fetch weights from ``value``, or None."""
    problem = source_problem(value)
    if problem:
        return problem
    scheme, rest = value.split("://", 1)
    if scheme == "hf":
        repo = rest.split("@", 1)[0]
        segments = repo.split("/")
        if len(segments) > 2 or not all(_SEGMENT.fullmatch(s) for s in segments):
            return f"source {value!r}: a Hugging Face source is hf://ORG/NAME (or hf://NAME)"
    elif scheme in ("s3", "gs"):
        bucket, _, key = rest.partition("/")
        if not _BUCKET.fullmatch(bucket) or not key:
            return f"source {value!r}: an object-store source is {scheme}://BUCKET/KEY"
    elif scheme == "oci":
        host, _, ref = rest.partition("/")
        if not _HOST.fullmatch(host) or not ref or not _OCI_REF.fullmatch(ref):
            return f"source {value!r}: an OCI source is oci://REGISTRY/REPOSITORY[:TAG|@sha256:DIGEST]"
    elif scheme == "file":
        if not rest.startswith("/") or rest.rstrip("/") == "" or "/../" in rest + "/":
            return f"source {value!r}: a file source is an absolute path, file:///PATH"
    elif scheme == "https":
        host, _, path = rest.partition("/")
        if not _HOST.fullmatch(host) or "." not in host.split(":")[0] and host.split(":")[0] != "localhost":
            return f"source {value!r}: an https source names a host, https://HOST/PATH"
    return None
