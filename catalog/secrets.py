"""Secrets the console must be able to read back (gateway tokens), kept
encrypted at rest with a key that is not in the database.

The key is LLMGW_ENCRYPTION_KEY when set, else derived from SECRET_KEY; a
stolen database dump alone then yields no working gateway credentials.
Rotating the key means re-entering the gateway tokens.
"""

from __future__ import annotations

import base64
import hashlib
import secrets as std_secrets
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


@lru_cache(maxsize=4)
def _fernet(material: str) -> Fernet:
    key = base64.urlsafe_b64encode(hashlib.sha256(b"llmgw-secrets:" + material.encode("utf-8")).digest())
    return Fernet(key)


def _cipher() -> Fernet:
    return _fernet(settings.LLMGW_ENCRYPTION_KEY or settings.SECRET_KEY)


def encrypt(value: str) -> str:
    return _cipher().encrypt(value.encode("utf-8")).decode("ascii")


def decrypt(value: str) -> str | None:
    """The plain secret, or None when it was encrypted under another key."""
    try:
        return _cipher().decrypt(value.encode("ascii")).decode("utf-8")
    except (InvalidToken, ValueError):
        return None


def fingerprint(value: str) -> str:
    """What a presented secret is looked up by."""
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def equal(a: str, b: str) -> bool:
    return std_secrets.compare_digest(a.encode("utf-8"), b.encode("utf-8"))
