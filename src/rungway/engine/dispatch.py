"""The async request path: try each planned route in order, relay the answer, record.

A `bad_request` from an upstream goes straight back to the client; every other failure
falls through to the next connection that serves the model. A stream can still fall
through until its first content event; see `relay.py`.
"""

from __future__ import annotations

import asyncio
import logging
import time

import orjson

from rungway.adapters.base import (
    UpstreamRequest,
    streams_only,
    whole_reply,
)
from rungway.budget import BudgetUnavailable, Shortfall
from rungway.clock import Clock
from rungway.config import TimeoutSettings
from rungway.credentials.redaction import redact_bytes
from rungway.engine.answers import AnswerReader
from rungway.engine.call import Call, Outcome, Refusal, Reply, StreamReply
from rungway.engine.giving_up import every_attempt_failed
from rungway.engine.masking import masked
from rungway.engine.planning import Plan, Route
from rungway.engine.record import Attempt, Recorder, RequestRecord, refusal_record
from rungway.engine.relay import StreamRelay
from rungway.engine.second_try import Attempted, second_try
from rungway.engine.spending import NO_COST, Spending, over_budget
from rungway.engine.state import Budget, QuotaObserver
from rungway.engine.trail import Trail, json_headers, ms, upstream_ms
from rungway.engine.translation import CodecFor, Translation
from rungway.engine.transport import (
    Transport,
    UpstreamResponse,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from rungway.pricing import PriceBook
from rungway.protocol.errors import ERROR_BODIES, STREAM_ERROR_EVENTS
from rungway.protocol.failures import Failure, FailureClass

log = logging.getLogger("rungway.engine")


class Engine:
    """Turns a checked client request into an upstream response."""

    def __init__(
        self,
        *,
        transport: Transport,
        timeouts: TimeoutSettings,
        recorder: Recorder,
        quota: QuotaObserver,
        budget: Budget,
        clock: Clock,
        codec_for: CodecFor,
        prices: PriceBook | None = None,
    ) -> None:
        self._transport = transport
        self._timeouts = timeouts
        self._codec_for = codec_for
        self._recorder = recorder
        self._quota = quota
        self._answers = AnswerReader(quota)
        self._spending = Spending(budget, prices)
        self._clock = clock
        self._loop: asyncio.AbstractEventLoop | None = None

    async def complete(self, call: Call, plan: Plan) -> Outcome:
        """Try each route in order until one answers; record the request once it has ended."""
        trail = Trail(call, plan)
        if any(route.adapter.api is not call.api for route in plan.routes):
            try:
                trail.translation = Translation(call.api, call.body, self._codec_for)
            except ValueError as error:
                message = f"this request cannot be translated for another API: {error}"
                return Refusal(400, message, "invalid_request")
        for route in plan.routes:
            if route.connection.id in trail.spent:
                continue
            started = time.perf_counter()
            result = await self._route(call, route, trail)
            if isinstance(result, Shortfall | BudgetUnavailable):
                # Checked on every attempt, fall-throughs included: this rung's budget (or
                # the key's) cannot take the request's worst case, or cannot be checked, so
                # it goes on up the plan.
                trail.shortfalls.append(result)
                continue
            if not isinstance(result, Failure):
                return result
            result = masked(result)
            self._spending.release(trail.reservation)
            trail.reservation = None
            if not result.returns_to_client:
                # The client's own mistake says nothing about the connection's health.
                self._quota.failed(route.connection.id, result, self._clock.now())
            trail.attempts.append(
                Attempt(
                    route.connection.id,
                    result.kind.value,
                    result.status,
                    ms(time.perf_counter() - started),
                    result.message[:300],
                )
            )
            if result.retry_after_s is not None:
                known = trail.retry_after_s
                trail.retry_after_s = (
                    min(known, result.retry_after_s) if known else result.retry_after_s
                )
            if result.returns_to_client:
                status = result.status or 400
                self._record(trail, route, result.kind.value, status)
                body = result.body or b""
                if route.adapter.api is not call.api:
                    # The upstream's error is in its own API's shape: say it in the client's.
                    body = ERROR_BODIES[call.api](status, result.message, "invalid_request")
                return Reply(status, json_headers(call, route), body)
            if result.kind is FailureClass.CONTEXT_TOO_LONG and plan.route_plan.ladder is None:
                # A named model has no larger-context alternative on another connection.
                break
        return self._give_up(trail)

    async def count_tokens(self, call: Call, plan: Plan) -> Outcome | None:
        """Forward a token count to the first route that has the endpoint, or return None."""
        for route in plan.routes:
            request = route.adapter.count_tokens_request(
                route.connection,
                raw_body=call.raw_body,
                body=call.body,
                upstream_model=route.target.model,
                client_headers=call.headers,
            )
            if request is None:
                continue
            try:
                response = await self._transport.send(request)
                body = await response.read()
            except (UpstreamTimeout, UpstreamUnreachable):
                continue
            if response.status < 300 or response.status in (400, 413):
                if response.status >= 300:
                    body = redact_bytes(body)  # an upstream's error may quote its credential
                return Reply(response.status, json_headers(call, route), body)
        return None

    async def _route(self, call: Call, route: Route, trail: Trail) -> Attempted:
        """One route's attempt, and its second try when the failure allows one.

        Whatever happens, its hold does not outlive it unless a stream has taken it over.
        """
        sent = route.connection.credential()
        trail.in_flight = False
        try:
            result = await self._attempt(call, route, trail, trail.translation)
            if isinstance(result, Failure):
                retry = await second_try(call, route, trail.translation, result, sent=sent)
                result = (
                    retry
                    if isinstance(retry, Failure)
                    else await self._attempt(retry.call, route, trail, retry.translation)
                )
        except Exception as error:
            log.exception(
                "request %s: the attempt on %s broke", call.request_id, route.connection.id
            )
            return self._broke(trail, route, type(error).__name__)
        except BaseException:
            self._broke(trail, route, None)
            raise
        return result

    def _broke(self, trail: Trail, route: Route, error: str | None) -> Refusal:
        """End an attempt that raised (`error` names the exception) or was cancelled (None).

        Its hold never outlives it: released if its request had not gone upstream, else
        settled whole in a ledger row, since the upstream may have billed up to it.
        """
        outcome = "gateway_error" if error is not None else "cancelled"
        if trail.in_flight:
            trail.attempts.append(Attempt(route.connection.id, outcome, None, 0.0, error or ""))
            self._record(trail, route, outcome, 500 if error is not None else 499, unknown=True)
        else:
            self._spending.release(trail.reservation)
            trail.reservation = None
            if trail.reached:
                self._record(trail, None, outcome, 500)
        message = (
            f"the gateway failed while handling this request ({error}); this is a fault in "
            f"the gateway, not in the request: its log holds the details under request id "
            f"{trail.call.request_id}"
        )
        return Refusal(500, message, "gateway_error")

    async def _held_request(
        self, call: Call, route: Route, trail: Trail, translation: Translation | None
    ) -> UpstreamRequest | Shortfall | BudgetUnavailable:
        """The request for `route`, once its budget holds what it could cost."""
        sent, sent_raw = call.body, call.raw_body
        if translation is not None:
            sent, sent_raw = translation.upstream_body(route.adapter.api, route.target.model)
        request = route.adapter.build_request(
            route.connection,
            body=sent,
            raw_body=sent_raw,
            upstream_model=route.target.model,
            client_headers=call.headers,
            query=call.query,
        )
        # Priced from what goes upstream (translation and thinking can raise the output
        # limit); a second try's hold replaces its first attempt's.
        self._spending.release(trail.reservation)
        trail.reservation = None
        hold = await self._spending.hold(call, route, sent, len(request.body), self._clock.now())
        if isinstance(hold, Shortfall | BudgetUnavailable):
            return hold
        trail.reservation, trail.in_flight = hold, True
        return request

    async def _attempt(
        self, call: Call, route: Route, trail: Trail, translation: Translation | None
    ) -> Attempted:
        """One attempt on `route`; `translation` is the request's, used if its API differs."""
        adapter, connection = route.adapter, route.connection
        translation = translation if adapter.api is not call.api else None
        request = await self._held_request(call, route, trail, translation)
        if isinstance(request, Shortfall | BudgetUnavailable):
            return request
        trail.sent, trail.answered, trail.overage = time.perf_counter(), None, False
        try:
            response = await self._transport.send(request)
        except UpstreamTimeout as error:
            trail.reached = True
            return Failure(FailureClass.TIMEOUT, str(error))
        except UpstreamUnreachable as error:
            trail.reached = trail.reached or error.reached
            return Failure(FailureClass.NETWORK, str(error))
        trail.reached = True
        received = self._clock.now()
        # Read at once, not with the windows: the row's price depends on it.
        trail.overage = self._answers.overage(route, response.headers)
        if response.status < 300:
            # A good answer's quota is recorded once the reply is on its way, off the
            # latency path; a failure's is recorded first, because its cooldown reads it.
            if self._loop is None:
                self._loop = asyncio.get_running_loop()
            self._loop.call_soon(self._answers.quota, route, response.headers, received)
        else:
            header_windows = self._answers.quota(route, response.headers, received)
        if call.stream and response.status == 200:
            return await self._relay(
                call, route, trail, request=request, response=response, translation=translation
            )
        try:
            body = await response.read()
        except (UpstreamTimeout, UpstreamUnreachable) as error:
            kind = (
                FailureClass.TIMEOUT if isinstance(error, UpstreamTimeout) else FailureClass.NETWORK
            )
            return Failure(kind, str(error))
        trail.answered = time.perf_counter()
        if response.status >= 300:
            return self._answers.failure(
                route,
                trail.spent,
                response.status,
                response.headers,
                body,
                received,
                header_windows,
            )
        parsed = whole_reply(adapter, body)
        if isinstance(parsed, Failure):
            return parsed
        if streams_only(adapter) or translation is not None:
            try:
                body = (
                    translation.reply(adapter.api, parsed)
                    if translation is not None
                    else orjson.dumps(parsed)
                )
            except ValueError as error:
                return Failure(FailureClass.SERVER, f"the upstream's reply cannot be read: {error}")
        trail.usage = adapter.read_usage(parsed)
        trail.ttfb = time.perf_counter()
        self._quota.succeeded(connection.id)
        self._record(trail, route, "ok", response.status)
        # Upstream rate-limit headers describe the gateway's account, not the client's, and
        # would mislead a client the gateway is about to carry past that limit: not passed.
        return Reply(response.status, json_headers(call, route), body)

    async def _relay(
        self,
        call: Call,
        route: Route,
        trail: Trail,
        *,
        request: UpstreamRequest,
        response: UpstreamResponse,
        translation: Translation | None,
    ) -> StreamReply | Failure:
        """Hold the stream's preamble until content starts, then hand the stream over."""
        adapter, connection = route.adapter, route.connection
        relay = StreamRelay(
            response,
            adapter.watch_stream(strip_usage_chunk=request.strip_usage_chunk),
            STREAM_ERROR_EVENTS[call.api],
            translation.stream(adapter.api) if translation is not None else None,
            first_content_s=self._timeouts.first_content_s,
            max_stream_s=self._timeouts.max_stream_s,
        )
        failure = await relay.prime()
        if failure is not None:
            return failure
        self._quota.succeeded(connection.id)

        def finish(outcome: str, failure: Failure | None) -> None:
            trail.usage = relay.watcher.usage
            trail.ttfb = relay.committed_at
            if failure is not None:
                failure = masked(failure)
                if outcome != "gateway_error":
                    # A fault of the gateway's own says nothing about the connection's health.
                    self._quota.failed(connection.id, failure, self._clock.now())
                trail.attempts.append(
                    Attempt(connection.id, outcome, 200, 0.0, failure.message[:300])
                )
            self._record(trail, route, outcome, 200)

        headers = json_headers(call, route)
        headers[0] = ("content-type", "text/event-stream; charset=utf-8")
        headers.append(("cache-control", "no-cache"))
        return StreamReply(headers, relay.body(finish))

    def refused(self, call: Call, refusal: Refusal, plan: Plan | None = None) -> Refusal:
        """Record `refusal` of a well-formed request, with the plan behind it; return it."""
        resolved = plan.resolution.resolved if plan is not None else call.body["model"]
        json = plan.route_plan_json if plan is not None else None
        self._recorder.record(refusal_record(call, refusal, resolved_model=resolved, plan=json))
        return refusal

    def _give_up(self, trail: Trail) -> Refusal:
        if not trail.attempts:
            # Nothing was tried: the plan itself refused, or every paid route was over budget.
            refusal = trail.plan.refusal or over_budget(trail.shortfalls, self._clock.now())
            return self.refused(trail.call, refusal, trail.plan)
        refusal = every_attempt_failed(trail.attempts, trail.plan, trail.retry_after_s)
        # Recorded even when no upstream was reached, so that `explain` finds it.
        self._record(trail, None, trail.attempts[-1].outcome, refusal.status)
        return refusal

    def _record(
        self,
        trail: Trail,
        route: Route | None,
        outcome: str,
        status: int,
        *,
        unknown: bool = False,
    ) -> None:
        """Write the request's row, settling its hold; `unknown` settles it whole."""
        call = trail.call
        now = time.perf_counter()
        connection = route.connection if route is not None else None
        reservation, trail.reservation = trail.reservation, None
        if unknown:
            costs = self._spending.settle_unknown(reservation, self._clock.now())
        elif route is not None:
            costs = self._spending.settle(
                call, route, trail.usage, reservation, self._clock.now(), overage=trail.overage
            )
        else:
            costs = NO_COST
        self._recorder.record(
            RequestRecord(
                request_id=call.request_id,
                started_at=call.started_at,
                client_key=call.client_key,
                api=call.api.value,
                requested_model=trail.plan.resolution.requested,
                resolved_model=trail.plan.resolution.resolved,
                provider=connection.provider if connection else None,
                connection_id=connection.id if connection else None,
                upstream_model=route.target.model if route else None,
                outcome=outcome,
                status=status,
                stream=call.stream,
                latency_ms=ms(now - call.started),
                ttfb_ms=ms(trail.ttfb - call.started) if trail.ttfb else None,
                usage=trail.usage,
                attempts=tuple(trail.attempts),
                rung=route.rung.label if route is not None and route.rung is not None else None,
                plan=trail.plan.route_plan_json,
                cost_usd=costs.incremental,
                list_cost_usd=costs.list_price,
                upstream_ms=upstream_ms(trail, now, served=route is not None and status < 300),
            ),
            settles=reservation,
        )
