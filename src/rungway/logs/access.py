"""Access lines: one per model request, saying what asked, what served it, and what it cost.

A request that a connection served is logged from its ledger row, as the row passes on
its way to the ledger; every other request is refused (a malformed body, an unknown
model, no usable plan, every attempt failed) and logged where the server refuses it.
Each line is a log record on the `rungway.access` logger: its message reads on a
terminal, and its `fields` attribute holds the same facts for the JSON output.
"""

from __future__ import annotations

import logging
from typing import Any

from rungway.budget.local import Reservation
from rungway.engine.call import Refusal
from rungway.engine.record import Recorder, RequestRecord

LOGGER = "rungway.access"
log = logging.getLogger(LOGGER)


class AccessLog:
    """A `Recorder` that passes each row to `inner`, then logs its access line."""

    def __init__(self, inner: Recorder) -> None:
        self._inner = inner

    def record(self, row: RequestRecord, settles: Reservation | None = None) -> None:
        """Hand `row` on first, then log it: a logging failure must not lose a row."""
        self._inner.record(row, settles)
        # A request nothing served is refused, and the server logs each refusal.
        if row.connection_id is not None and log.isEnabledFor(logging.INFO):
            fields = served_fields(row)
            log.info(served_line(fields), extra={"fields": fields})


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


def served_line(fields: dict[str, Any]) -> str:
    """`1re85hc3h2mr claude-sonnet-4-5 -> claude-plan/claude-sonnet-4-5 [subscription] ...`."""
    served = (
        f"{fields['connection']}/{fields['upstream_model']}" if fields["connection"] else "nothing"
    )
    rung = f" [{fields['rung']}]" if fields["rung"] else ""
    listed = fields["list_cost_usd"]
    cost = f"${fields['cost_usd']:.6f}" + (f" (list ${listed:.6f})" if listed else "")
    fell = fields["fall_throughs"]
    after = f", after {fell} fall-through{'s' if fell > 1 else ''}" if fell > 0 else ""
    return (
        f"{fields['request_id']} {fields['model']} -> {served}{rung} "
        f"{fields['status']} {fields['outcome']} {fields['latency_ms']:.0f} ms {cost}{after}"
    )


def log_refusal(
    request_id: str, *, api: str, model: str | None, refusal: Refusal, latency_ms: float
) -> None:
    """The access line of a request the gateway answered itself, without an upstream."""
    if not log.isEnabledFor(logging.INFO):
        return
    fields = {
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
    }
    log.info(
        f"{request_id} {model or '-'} -> refused {refusal.status} {fields['outcome']} "
        f"{latency_ms:.0f} ms: {refusal.message}",
        extra={"fields": fields},
    )
