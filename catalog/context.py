"""The request being served, for the audit rows and log lines it causes."""

from __future__ import annotations

import contextvars

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("llmgw_request_id", default="")


def current_request_id() -> str:
    return request_id.get()
