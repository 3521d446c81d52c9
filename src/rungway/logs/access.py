"""Access lines: one per model request, saying what asked, what served it, and what it cost.

A request that a connection served is logged from its ledger row, as the row passes on
its way to the ledger; every other request is refused (a malformed body, an unknown
model, no usable plan, every attempt failed) and logged where the server refuses it.

On the request path an access line costs a dict and a queue put: the entry carries the
facts as fields, and the log writer (`output.py`) turns them into a line, masks it and
writes it, off the event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rungway.budget.local import Reservation
from rungway.engine.call import Refusal
from rungway.engine.record import Recorder, RequestRecord

LOGGER = "rungway.access"
"""The logger name access lines carry in the JSON output."""


@dataclass(frozen=True, slots=True)
class AccessEntry:
    """One request's access line, as facts; `line()` reads it out."""

    created: float
    fields: dict[str, Any]

    def line(self) -> str:
        """`1re85hc3h2mr claude-sonnet-4-5 -> claude-plan/claude-sonnet-4-5 [subscription] ...`."""
        fields = self.fields
        if fields["connection"] is None:
            return (
                f"{fields['request_id']} {fields['model'] or '-'} -> refused {fields['status']} "
                f"{fields['outcome']} {fields['latency_ms']:.0f} ms: {fields['detail']}"
            )
        served = f"{fields['connection']}/{fields['upstream_model']}"
        rung = f" [{fields['rung']}]" if fields["rung"] else ""
        listed = fields["list_cost_usd"]
        cost = f"${fields['cost_usd']:.6f}" + (f" (list ${listed:.6f})" if listed else "")
        fell = fields["fall_throughs"]
        after = f", after {fell} fall-through{'s' if fell > 1 else ''}" if fell > 0 else ""
        return (
            f"{fields['request_id']} {fields['model']} -> {served}{rung} "
            f"{fields['status']} {fields['outcome']} {fields['latency_ms']:.0f} ms {cost}{after}"
        )


AccessSink = Callable[[AccessEntry], None]
"""Where access entries go: the log writer's queue."""


class AccessLog:
    """A `Recorder` that passes each row to `inner`, then hands on its access entry."""

    def __init__(self, inner: Recorder, sink: AccessSink) -> None:
        self._inner = inner
        self._sink = sink

    def record(self, row: RequestRecord, settles: Reservation | None = None) -> None:
        """Hand `row` on first, so a logging fault cannot lose a row; then its entry."""
        self._inner.record(row, settles)
        # A request nothing served is refused, and the server logs each refusal.
        if row.connection_id is not None:
            self._sink(AccessEntry(time.time(), served_fields(row)))


def served_fields(row: RequestRecord) -> dict[str, Any]:
    """The access fields of a request a connection served."""
    return {
        "request_id": row.request_id,
        "api": row.api,
        "model": row.requested_model,
        "connection": row.connection_id,
        "upstream_model": row.upstream_model,
        "rung": row.rung,
        "status": row.status,
        "outcome": row.outcome,
        "stream": row.stream,
        "latency_ms": round(row.latency_ms, 1),
        "cost_usd": row.cost_usd,
        "list_cost_usd": row.list_cost_usd,
        "fall_throughs": sum(a.connection_id != row.connection_id for a in row.attempts),
        "client_key": row.client_key,
    }


def refusal_entry(
    request_id: str, *, api: str, model: str | None, refusal: Refusal, latency_ms: float
) -> AccessEntry:
    """The access entry of a request the gateway answered itself, without an upstream."""
    return AccessEntry(
        time.time(),
        {
            "request_id": request_id,
            "api": api,
            "model": model,
            "connection": None,
            "rung": None,
            "status": refusal.status,
            "outcome": refusal.code or "refused",
            "latency_ms": round(latency_ms, 1),
            "cost_usd": 0.0,
            "detail": refusal.message,
        },
    )
