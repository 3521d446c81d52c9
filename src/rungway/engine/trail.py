"""What one request has been through on its way up the plan, and the figures read from it.

The attempt loop (`dispatch.py`) fills a `Trail` as it goes; the ledger row is written
from it once the request has ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rungway.budget import BudgetUnavailable, Reservation, Shortfall
from rungway.engine.call import Call
from rungway.engine.planning import Plan, Route
from rungway.engine.record import Attempt
from rungway.engine.translation import Translation
from rungway.protocol.usage import Usage


@dataclass(slots=True)
class Trail:
    """What one request has been through so far."""

    call: Call
    plan: Plan
    attempts: list[Attempt] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    ttfb: float | None = None
    sent: float = 0.0
    """When the current attempt's request went upstream."""
    answered: float | None = None
    """When the current attempt's whole JSON reply had arrived (None for a stream)."""
    reached: bool = False
    retry_after_s: float | None = None
    reservation: Reservation | None = None
    """The current attempt's hold, until it is settled, released or handed to its stream."""
    in_flight: bool = False
    """Whether the current route's request has gone upstream (so it may be billed)."""
    overage: bool = False
    """Whether the current attempt's response says it was served past the plan's quota."""
    shortfalls: list[Shortfall | BudgetUnavailable] = field(default_factory=list)
    translation: Translation | None = None
    spent: set[str] = field(default_factory=set)
    """Connections whose quota ran out for every model during this request."""


def json_headers(call: Call, route: Route) -> list[tuple[str, str]]:
    """The headers of a JSON answer: the request id, and the connection and rung serving it."""
    headers = [
        ("content-type", "application/json"),
        ("x-rungway-request-id", call.request_id),
        ("x-rungway-connection", route.connection.id),
    ]
    if route.rung is not None:
        headers.append(("x-rungway-rung", route.rung.label))
    return headers


def upstream_ms(trail: Trail, now: float, *, served: bool) -> float:
    """The time spent waiting on upstreams (see `RequestRecord.upstream_ms`)."""
    # Failed attempts are timed whole (they hold no gateway work worth separating); the
    # serving one from its send to its whole reply, or to `now`, its stream's end.
    waited = sum(attempt.latency_ms for attempt in trail.attempts)
    if served:
        waited += ms((trail.answered or now) - trail.sent)
    return round(waited, 3)


def ms(seconds: float) -> float:
    """Seconds as milliseconds, to the microsecond."""
    return round(seconds * 1000, 3)
