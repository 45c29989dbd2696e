"""Audit rows, written in the transaction of the change they describe."""

from __future__ import annotations

from ..context import current_request_id
from ..models import AuditEvent


def record(*, actor: str, action: str, object_type: str, object_id: str, before=None, after=None) -> AuditEvent:
    return AuditEvent.objects.create(
        actor=actor or "system",
        action=action,
        object_type=object_type,
        object_id=object_id,
        before=before,
        after=after,
        request_id=current_request_id(),
    )
