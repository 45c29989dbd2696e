"""The records. Written only by ``catalog.services``; read by selectors."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models


class StoredModel(models.Model):
    """A model added at runtime, kept as the definition its author gave.

    The definition is stored as given, not as built: a field the author left
    out keeps following the cluster's defaults when those change. It is JSON
    text rather than a JSON column so that one row that no longer decodes is
    skipped at load instead of failing the query that reads them all.
    """

    name = models.CharField(max_length=200, unique=True)
    definition = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=150, blank=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)
    updated_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class SettingsVersion(models.Model):
    """One version of the cluster settings document. Append-only."""

    number = models.PositiveIntegerField(unique=True)
    document = models.JSONField()
    author = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    comment = models.TextField(blank=True)
    parent = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-number"]

    def __str__(self) -> str:
        return f"settings v{self.number}"


class CatalogVersion(models.Model):
    """A catalog that was in force, recorded in the transaction that made it.

    The table is the outbox: a delivery reads the newest row when it runs,
    so nothing that the broker loses can leave a gateway on an old catalog.
    """

    version = models.PositiveIntegerField(unique=True)
    digest = models.CharField(max_length=80)
    # The canonical bytes of the models list, kept as text so that what a
    # gateway receives is byte for byte what the digest was computed over.
    document = models.TextField()
    reason = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=150, blank=True)
    settings_version = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-version"]

    def __str__(self) -> str:
        return f"catalog v{self.version}"


class AuditEvent(models.Model):
    """Who changed what, when, and the record before and after. Append-only."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.CharField(max_length=150, db_index=True)
    action = models.CharField(max_length=60)
    object_type = models.CharField(max_length=40)
    object_id = models.CharField(max_length=200, db_index=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    request_id = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.actor} {self.action} {self.object_id}"


def hash_token(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class ApiToken(models.Model):
    """A user's API token. Only its hash is kept: a leaked database must not
    hand out working credentials."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12)  # enough to tell tokens apart in a list
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.user} {self.prefix}…"


class Gateway(models.Model):
    """A gateway the console pushes catalogs to, and what it acknowledged.

    Its token is a shared secret used both ways (sent on push, accepted on
    pull), so it is kept encrypted rather than hashed; the hash beside it
    finds the gateway from a pulled request without decrypting every row.
    """

    name = models.CharField(max_length=100, unique=True)
    url = models.URLField(max_length=500)
    token_encrypted = models.TextField()
    token_hash = models.CharField(max_length=64, unique=True)
    enabled = models.BooleanField(default=True)
    acked_version = models.PositiveIntegerField(null=True, blank=True)
    acked_digest = models.CharField(max_length=80, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    # Consecutive failed deliveries: drives the backoff and the `failing` state.
    failures = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    rejected_version = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class PeerOffer(models.Model):
    """The last offer fetched from a peer cluster, kept when the peer is
    unreachable so its models stay usable through a short outage."""

    peer = models.CharField(max_length=63, unique=True)
    offered = models.JSONField(default=list)  # the models as the peer offered them
    digest = models.CharField(max_length=80, blank=True)
    etag = models.CharField(max_length=200, blank=True)
    fetched_at = models.DateTimeField(null=True, blank=True)  # last successful fetch
    checked_at = models.DateTimeField(null=True, blank=True)  # last attempt
    last_error = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["peer"]

    def __str__(self) -> str:
        return f"offer of {self.peer}"
