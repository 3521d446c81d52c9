"""What the engine reports about each request, and the port it reports it through."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from rungway.budget.local import Reservation
from rungway.engine.call import Call, Refusal
from rungway.protocol.usage import ReportedUsage


@dataclass(frozen=True, slots=True)
class Attempt:
    """One try at one connection."""

    connection_id: str
    outcome: str
    status: int | None
    latency_ms: float
    detail: str = ""


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One ledger row: a request that was tried upstream, or a well-formed one the gateway
    refused without trying (no connection, no cost, the refusal's code as its outcome)."""

    request_id: str
    started_at: float
    client_key: str | None
    api: str
    requested_model: str
    resolved_model: str
    provider: str | None
    connection_id: str | None
    upstream_model: str | None
    outcome: str
    status: int
    stream: bool
    latency_ms: float
    ttfb_ms: float | None
    usage: ReportedUsage = field(default_factory=ReportedUsage)
    attempts: tuple[Attempt, ...] = ()
    rung: str | None = None
    plan: bytes | None = None
    """The route plan as JSON: candidates in order and every skip with its reason."""
    cost_usd: float = 0.0
    """What the request added to the bill: 0 on the subscription, keyless and free rungs."""
    list_cost_usd: float | None = None
    """What the same tokens cost at list price (None when the model has no list price)."""
    upstream_ms: float | None = None
    """Time spent waiting on upstreams: each failed attempt whole, then the serving attempt
    from sending its request until its whole JSON reply has arrived, or until its stream
    ends. `latency_ms - upstream_ms` is the gateway's own share (parsing, planning,
    translation, recording); per-event work inside a stream counts as upstream time."""


class Recorder(Protocol):
    """Where finished requests go: the ledger."""

    def record(self, row: RequestRecord, settles: Reservation | None = None) -> None:
        """Accept `row`, which replaces `settles`, without waiting for the disk."""
        ...


def refusal_record(
    call: Call, refusal: Refusal, *, resolved_model: str, plan: bytes | None
) -> RequestRecord:
    """The row of a well-formed request refused before any attempt (a ladder with nothing
    left, a spent budget, a client over its rate), with the route plan behind it if any."""
    return RequestRecord(
        request_id=call.request_id,
        started_at=call.started_at,
        client_key=call.client_key,
        api=call.api.value,
        requested_model=call.body["model"],
        resolved_model=resolved_model,
        provider=None,
        connection_id=None,
        upstream_model=None,
        outcome=refusal.code or "refused",
        status=refusal.status,
        stream=call.stream,
        latency_ms=round((time.perf_counter() - call.started) * 1000, 3),
        ttfb_ms=None,
        plan=plan,
    )
