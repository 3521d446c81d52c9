"""One request's bookkeeping on its way up the plan: what it has been through, the
headers of the client's answer, its budget hold, and its ledger row.

The attempt loop (`dispatch.py`) decides what to try; a `Trail` keeps the figures each
attempt leaves, holds and releases its budget, and writes the request's row once it has
ended, settling the hold. A relayed stream ends through `stream_ended`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rungway.budget import BudgetUnavailable, Reservation, Shortfall
from rungway.clock import Clock
from rungway.engine.call import Call, Refusal
from rungway.engine.masking import masked
from rungway.engine.pins import PinStore
from rungway.engine.planning import Plan, Route
from rungway.engine.record import Attempt, Recorder, RequestRecord
from rungway.engine.spending import NO_COST, Spending
from rungway.engine.state import QuotaObserver
from rungway.protocol.failures import Failure
from rungway.protocol.sessions import response_key
from rungway.protocol.usage import INVALID_USAGE, ReportedUsage
from rungway.quota.limits import limit_detail
from rungway.routing.rungs import Rung

log = logging.getLogger("rungway.engine")


@dataclass(frozen=True, slots=True)
class Books:
    """What every request's trail writes to: budgets, the ledger, connection health."""

    spending: Spending
    recorder: Recorder
    quota: QuotaObserver
    clock: Clock
    pins: PinStore | None = None
    """Where sessions are pinned to the connection that served them (None: no affinity)."""


class Trail:
    """What one request has been through so far, and its hold until it is settled."""

    __slots__ = (
        "_books",
        "_route",
        "_sent",
        "answered",
        "attempts",
        "call",
        "in_flight",
        "overage",
        "plan",
        "reached",
        "reservation",
        "retry_after_s",
        "sent",
        "ttfb",
        "usage",
    )

    def __init__(self, call: Call, plan: Plan, books: Books) -> None:
        self.call = call
        self.plan = plan
        self._books = books
        self._route: Route | None = None
        self._sent: tuple[Mapping[str, Any], int] | None = None
        """The current attempt's body as it went upstream, and its length: its ceiling."""
        self.attempts: list[Attempt] = []
        self.usage = ReportedUsage()
        self.ttfb: float | None = None
        self.sent = 0.0
        """When the current attempt's request went upstream."""
        self.answered: float | None = None
        """When the current attempt's whole JSON reply had arrived (None for a stream)."""
        self.reached = False
        self.retry_after_s: float | None = None
        self.reservation: Reservation | None = None
        """The current attempt's hold, until it is settled, released or handed to its stream."""
        self.in_flight = False
        """Whether the current route's request has gone upstream (so it may be billed)."""
        self.overage = False
        """Whether the current attempt's response says it was served past the plan's quota."""

    def headers(self, route: Route) -> list[tuple[str, str]]:
        """The headers of a JSON answer from `route` (see `json_headers`)."""
        return json_headers(self.call, route)

    def stream_headers(self, route: Route) -> list[tuple[str, str]]:
        """The headers of a relayed stream."""
        headers = self.headers(route)
        headers[0] = ("content-type", "text/event-stream; charset=utf-8")
        headers.append(("cache-control", "no-cache"))
        return headers

    async def hold(
        self, route: Route, sent: Mapping[str, Any], sent_bytes: int
    ) -> Shortfall | BudgetUnavailable | None:
        """Hold what an attempt on `route` sending `sent` could cost, in place of any
        earlier attempt's hold; the shortfall when its budget cannot take it (or check it)."""
        self.release()
        hold = await self._books.spending.hold(
            self.call, route, sent, sent_bytes, self._books.clock.now()
        )
        if isinstance(hold, Shortfall | BudgetUnavailable):
            return hold
        self.reservation, self.in_flight, self._route = hold, True, route
        self._sent = (sent, sent_bytes)
        return None

    def served(self, route: Route, response_id: object = None) -> None:
        """Pin the request's session to the plan account that served it (a move when it was
        pinned elsewhere; a paid rung's connection is never pinned); a Responses reply's
        `response_id` is pinned too, for the turn that names it as its
        `previous_response_id`."""
        session = self.plan.session
        if session is None or (route.rung is not Rung.SUBSCRIPTION and response_id is None):
            return  # nothing to pin (a session's key may only label its ledger row)
        pins = self._books.pins
        if pins is None:
            return
        now = self._books.clock.now()
        connection_id = route.connection.id
        if route.rung is Rung.SUBSCRIPTION:
            # A turn served off the plans (a paid rung while the pool is spent) leaves the
            # pin on the account that holds the session's prompt cache, to return to.
            pins.pin(session, connection_id, now)
        if response_id is not None:
            chained = response_key(response_id)
            if chained is not None:
                pins.pin(chained, connection_id, now)

    def release(self) -> None:
        """The current attempt cost nothing: let its hold go."""
        self._books.spending.release(self.reservation)
        self.reservation = None

    def failed(self, route: Route, failure: Failure, started: float) -> None:
        """Note an attempt on `route`, begun at `started`, that ended in `failure`."""
        self.attempts.append(
            Attempt(
                route.connection.id,
                failure.kind.value,
                failure.status,
                ms(time.perf_counter() - started),
                limit_detail(failure),
            )
        )
        if failure.retry_after_s is not None:
            known = self.retry_after_s
            self.retry_after_s = (
                min(known, failure.retry_after_s) if known else failure.retry_after_s
            )

    def broke(self, route: Route, error: str | None) -> Refusal:
        """End an attempt that raised (`error` names the exception) or was cancelled (None).

        Its hold never outlives it: released if its request had not gone upstream, else
        settled whole in a ledger row, since the upstream may have billed up to it.
        """
        outcome = "gateway_error" if error is not None else "cancelled"
        if self.in_flight:
            self.attempts.append(Attempt(route.connection.id, outcome, None, 0.0, error or ""))
            self.record(route, outcome, 500 if error is not None else 499, unknown=True)
        else:
            self.release()
            if self.reached:
                self.record(None, outcome, 500)
        message = (
            f"the gateway failed while handling this request ({error}); this is a fault in "
            f"the gateway, not in the request: its log holds the details under request id "
            f"{self.call.request_id}"
        )
        return Refusal(500, message, "gateway_error")

    def stream_ended(
        self,
        outcome: str,
        failure: Failure | None,
        usage: ReportedUsage,
        ttfb: float | None,
        *,
        finished: bool,
    ) -> None:
        """Record the relayed stream of the current attempt, ended with `outcome`; one not
        `finished` (cut off, or left by its client) is settled at its whole hold."""
        route = self._route
        assert route is not None, "a stream is relayed only once its attempt is held"
        self.usage, self.ttfb = usage, ttfb
        if failure is not None:
            failure = masked(failure)
            connection_id = route.connection.id
            if outcome != "gateway_error":
                # A fault of the gateway's own says nothing about the connection's health.
                self._books.quota.failed(connection_id, failure, self._books.clock.now())
            self.attempts.append(Attempt(connection_id, outcome, 200, 0.0, failure.message[:300]))
        # Before its end a stream has reported no final usage, but the upstream bills what
        # it generated, the rest of it included when it does not notice the close.
        self.record(route, outcome, 200, unknown=not finished)

    def record(
        self, route: Route | None, outcome: str, status: int, *, unknown: bool = False
    ) -> None:
        """Write the request's row, settling its hold; `unknown` settles it whole."""
        call, books = self.call, self._books
        now = time.perf_counter()
        connection = route.connection if route is not None else None
        reservation, self.reservation = self.reservation, None
        if unknown:
            costs = books.spending.settle_unknown(reservation, books.clock.now())
        elif route is not None:
            if self.usage.invalid is not None:
                outcome = self._invalid_usage(route, outcome, status)
            costs = books.spending.settle(
                call,
                route,
                self.usage,
                reservation,
                books.clock.now(),
                overage=self.overage,
                sent=self._sent,
            )
        else:
            costs = NO_COST
        books.recorder.record(
            RequestRecord(
                request_id=call.request_id,
                started_at=call.started_at,
                client_key=call.client_key,
                api=call.api.value,
                requested_model=self.plan.resolution.requested,
                resolved_model=self.plan.resolution.resolved,
                provider=connection.provider if connection else None,
                connection_id=connection.id if connection else None,
                upstream_model=route.target.model if route else None,
                outcome=outcome,
                status=status,
                stream=call.stream,
                latency_ms=ms(now - call.started),
                ttfb_ms=ms(self.ttfb - call.started) if self.ttfb else None,
                usage=self.usage,
                attempts=tuple(self.attempts),
                rung=route.rung.label if route is not None and route.rung is not None else None,
                plan=self.plan.route_plan_json,
                cost_usd=costs.incremental,
                list_cost_usd=costs.list_price,
                upstream_ms=self._upstream_ms(now, served=route is not None and status < 300),
            ),
            settles=reservation,
        )

    def _invalid_usage(self, route: Route, outcome: str, status: int) -> str:
        """Note the upstream's failure to report usage that can be read; the outcome the
        request's row takes (`invalid_usage` for an answer that was otherwise whole)."""
        detail = (
            f"the upstream's usage is not a token count ({self.usage.invalid}); "
            "the request is billed at its ceiling"
        )
        log.warning(
            "request %s: %s sent usage that is not a token count (%s); billed at its ceiling",
            self.call.request_id,
            route.connection.id,
            self.usage.invalid,
        )
        self.attempts.append(Attempt(route.connection.id, INVALID_USAGE, status, 0.0, detail))
        return INVALID_USAGE if outcome == "ok" else outcome

    def _upstream_ms(self, now: float, *, served: bool) -> float:
        """The time spent waiting on upstreams (see `RequestRecord.upstream_ms`)."""
        # Failed attempts are timed whole (they hold no gateway work worth separating); the
        # serving one from its send to its whole reply, or to `now`, its stream's end.
        waited = sum(attempt.latency_ms for attempt in self.attempts)
        if served:
            waited += ms((self.answered or now) - self.sent)
        return round(waited, 3)


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


def ms(seconds: float) -> float:
    """Seconds as milliseconds, to the microsecond."""
    return round(seconds * 1000, 3)
