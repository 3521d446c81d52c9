"""Ledger rows for tests: one ordinary served request, with any field replaced."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rungway.engine.record import RequestRecord

SERVED = RequestRecord(
    request_id="r1",
    started_at=1_790_000_000.0,
    client_key=None,
    api="anthropic_messages",
    requested_model="claude-sonnet-4-5",
    resolved_model="claude-sonnet-4-5",
    provider="anthropic",
    connection_id="plan",
    upstream_model="claude-sonnet-4-5",
    outcome="ok",
    status=200,
    stream=False,
    latency_ms=120.0,
    ttfb_ms=110.0,
    rung="subscription",
)
"""A non-streamed Claude request the subscription served, with no usage and no cost."""


def request_record(**fields: Any) -> RequestRecord:
    """`SERVED` with `fields` replaced (each a `RequestRecord` field, by name)."""
    return replace(SERVED, **fields)
