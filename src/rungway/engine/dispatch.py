"""The async request path: try each planned route in order and relay the answer.

A `bad_request` from an upstream goes straight back to the client; every other failure
falls through to the next connection that serves the model. A stream can still fall
through until its first content event; see `relay.py`. The request's bookkeeping (its
answer's headers, budget hold and ledger row) is its `Trail`'s.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import orjson

from rungway.adapters.base import (
    UpstreamCall,
    UpstreamRequest,
    envelope_of,
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
from rungway.engine.pins import PinStore
from rungway.engine.planning import Plan, Route
from rungway.engine.record import Recorder, refusal_record
from rungway.engine.relay import StreamRelay
from rungway.engine.second_try import Attempted, second_try
from rungway.engine.spending import Spending, over_budget
from rungway.engine.state import Budget, QuotaObserver
from rungway.engine.trail import Books, Trail, json_headers
from rungway.engine.translation import CodecFor, Translation
from rungway.engine.transport import (
    Transport,
    UpstreamResponse,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from rungway.pricing import PriceBook
from rungway.protocol.api import Api
from rungway.protocol.errors import ERROR_BODIES, STREAM_ERROR_EVENTS
from rungway.protocol.failures import Failure, FailureClass
from rungway.protocol.usage import ReportedUsage, without_bad_counts

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
        pins: PinStore | None = None,
    ) -> None:
        self._transport = transport
        self._timeouts = timeouts
        self._codec_for = codec_for
        self._recorder = recorder
        self._quota = quota
        self._answers = AnswerReader(quota)
        self._books = Books(Spending(budget, prices), recorder, quota, clock, pins)
        self._clock = clock
        self._loop: asyncio.AbstractEventLoop | None = None

    async def complete(self, call: Call, plan: Plan) -> Outcome:
        """Try each route in order until one answers; record the request once it has ended."""
        trail = Trail(call, plan, self._books)
        translation: Translation | None = None
        if any(route.adapter.api is not call.api for route in plan.routes):
            try:
                translation = Translation(call.api, call.body, self._codec_for)
            except ValueError as error:
                message = f"this request cannot be translated for another API: {error}"
                return Refusal(400, message, "invalid_request")
        shortfalls: list[Shortfall | BudgetUnavailable] = []
        spent: set[str] = set()  # connections whose quota ran out for every model
        for route in plan.routes:
            if route.connection.id in spent:
                continue
            started = time.perf_counter()
            result = await self._route(call, route, trail, translation, spent)
            if isinstance(result, Shortfall | BudgetUnavailable):
                # Checked on every attempt, fall-throughs included: this rung's budget (or
                # the key's) cannot take the request's worst case, or cannot be checked, so
                # it goes on up the plan.
                shortfalls.append(result)
                continue
            if not isinstance(result, Failure):
                return result
            result = masked(result)
            trail.release()
            if not result.returns_to_client:
                # The client's own mistake says nothing about the connection's health.
                self._quota.failed(route.connection.id, result, self._clock.now())
            trail.failed(route, result, started)
            if result.returns_to_client:
                status = result.status or 400
                trail.record(route, result.kind.value, status)
                body = result.body or b""
                if route.adapter.api is not call.api:
                    # The upstream's error is in its own API's shape: say it in the client's.
                    body = ERROR_BODIES[call.api](status, result.message, "invalid_request")
                return Reply(status, trail.headers(route), body)
            if result.kind is FailureClass.CONTEXT_TOO_LONG and plan.route_plan.ladder is None:
                # A named model has no larger-context alternative on another connection.
                break
        return self._give_up(trail, shortfalls)

    async def count_tokens(self, call: Call, plan: Plan) -> Outcome | None:
        """Forward a token count to the first route that has the endpoint, or return None."""
        for route in plan.routes:
            request = route.adapter.count_tokens_request(
                UpstreamCall(
                    route.connection,
                    route.target.model,
                    call.body,
                    call.raw_body,
                    call.headers,
                    stream=False,
                )
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

    async def _route(
        self,
        call: Call,
        route: Route,
        trail: Trail,
        translation: Translation | None,
        spent: set[str],
    ) -> Attempted:
        """One route's attempt, and its second try when the failure allows one.

        Whatever happens, its hold does not outlive it unless a stream has taken it over.
        """
        project = route.connection.project
        if project is not None and project.current() is None and await project.discover() is None:
            # A Code Assist login names its project in every request; it is found once, here
            # when start-up could not.
            return Failure(
                FailureClass.SERVER, f"the Code Assist project is not known: {project.problem}"
            )
        sent = route.connection.credential()
        trail.in_flight = False
        try:
            result = await self._attempt(call, route, trail, translation, spent)
            if isinstance(result, Failure):
                retry = await second_try(call, route, translation, result, sent=sent)
                result = (
                    retry
                    if isinstance(retry, Failure)
                    else await self._attempt(retry.call, route, trail, retry.translation, spent)
                )
        except Exception as error:
            log.exception(
                "request %s: the attempt on %s broke", call.request_id, route.connection.id
            )
            return trail.broke(route, type(error).__name__)
        except BaseException:
            trail.broke(route, None)
            raise
        return result

    async def _held_request(
        self, call: Call, route: Route, trail: Trail, translation: Translation | None
    ) -> UpstreamRequest | Shortfall | BudgetUnavailable:
        """The request for `route`, once its budget holds what it could cost."""
        sent, sent_raw = call.body, call.raw_body
        if translation is not None:
            sent, sent_raw = translation.upstream_body(route.adapter.api, route.target.model)
        request = route.adapter.build_request(
            UpstreamCall(
                route.connection,
                route.target.model,
                sent,
                sent_raw,
                call.headers,
                call.stream,
                call.query,
            )
        )
        # Priced from what goes upstream (translation and thinking can raise the output
        # limit); a second try's hold replaces its first attempt's.
        shortfall = await trail.hold(route, sent, len(request.body))
        return request if shortfall is None else shortfall

    async def _attempt(
        self,
        call: Call,
        route: Route,
        trail: Trail,
        translation: Translation | None,
        spent: set[str],
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
        body = await self._read(trail, route, response)
        if not isinstance(body, bytes):
            return body
        trail.answered = time.perf_counter()
        if response.status >= 300:
            return self._answers.failure(
                route,
                spent,
                response.status,
                response.headers,
                body,
                received,
                header_windows,
            )
        parsed = whole_reply(adapter, body)
        if isinstance(parsed, Failure):
            return parsed
        if streams_only(adapter) or translation is not None or envelope_of(adapter) is not None:
            # The client gets a reply the upstream did not send as such: assembled from a
            # stream, translated, or taken out of its envelope.
            try:
                body = (
                    translation.reply(adapter.api, parsed)
                    if translation is not None
                    else orjson.dumps(parsed)
                )
            except ValueError as error:
                return Failure(FailureClass.SERVER, f"the upstream's reply cannot be read: {error}")
        trail.usage = adapter.read_usage(parsed)
        body = _readable(trail.usage, parsed, body, translated=translation is not None)
        trail.ttfb = time.perf_counter()
        self._quota.succeeded(connection.id)
        # A Responses reply's id chains the next turn to this one; a translated reply's id
        # is the translation's, which no upstream stores.
        chained = call.api is Api.OPENAI_RESPONSES and translation is None
        trail.served(route, parsed.get("id") if chained else None)
        trail.record(route, "ok", response.status)
        # Upstream rate-limit headers describe the gateway's account, not the client's, and
        # would mislead a client the gateway is about to carry past that limit: not passed.
        return Reply(response.status, trail.headers(route), body)

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
        adapter = route.adapter
        envelope = envelope_of(adapter)
        relay = StreamRelay(
            response,
            adapter.watch_stream(strip_usage_chunk=request.strip_usage_chunk),
            STREAM_ERROR_EVENTS[call.api],
            translation.stream(adapter.api) if translation is not None else None,
            first_content_s=self._timeouts.first_content_s,
            max_stream_s=self._timeouts.max_stream_s,
            unwrap=envelope.unwrap_event if envelope is not None else None,
        )
        failure = await relay.prime()
        if failure is not None:
            return failure
        self._quota.succeeded(route.connection.id)
        trail.served(route)
        return StreamReply(trail.stream_headers(route), relay.body(trail))

    async def _read(
        self, trail: Trail, route: Route, response: UpstreamResponse
    ) -> bytes | Failure | Refusal:
        """The answer's whole body, or the failure to read it.

        A good (2xx) answer that never arrives whole was served and billed, for an amount
        the gateway cannot read: its hold is settled whole, and no other connection is
        tried, which would bill it again (the refusal). Any other is the attempt's failure.
        """
        try:
            return await response.read()
        except (UpstreamTimeout, UpstreamUnreachable) as error:
            kind = (
                FailureClass.TIMEOUT if isinstance(error, UpstreamTimeout) else FailureClass.NETWORK
            )
            failure = Failure(kind, str(error))
        if response.status >= 300:
            return failure
        failure = masked(failure)
        self._quota.failed(route.connection.id, failure, self._clock.now())
        trail.failed(route, failure, trail.sent)
        refusal = every_attempt_failed(trail.attempts, trail.plan, None)
        trail.record(route, failure.kind.value, refusal.status, unknown=True)
        return refusal

    def refused(self, call: Call, refusal: Refusal, plan: Plan | None = None) -> Refusal:
        """Record `refusal` of a well-formed request, with the plan behind it; return it."""
        resolved = plan.resolution.resolved if plan is not None else call.body["model"]
        json = plan.route_plan_json if plan is not None else None
        self._recorder.record(refusal_record(call, refusal, resolved_model=resolved, plan=json))
        return refusal

    def _give_up(self, trail: Trail, shortfalls: list[Shortfall | BudgetUnavailable]) -> Refusal:
        if not trail.attempts:
            # Nothing was tried: the plan itself refused, or every paid route was over budget.
            plan_reset = trail.plan.route_plan.earliest_reset
            refusal = trail.plan.refusal or over_budget(shortfalls, self._clock.now(), plan_reset)
            return self.refused(trail.call, refusal, trail.plan)
        refusal = every_attempt_failed(
            trail.attempts, trail.plan, trail.retry_after_s, self._clock.now()
        )
        # Recorded even when no upstream was reached, so that `explain` finds it.
        trail.record(None, trail.attempts[-1].outcome, refusal.status)
        return refusal


def _readable(
    usage: ReportedUsage, parsed: dict[str, Any], body: bytes, *, translated: bool
) -> bytes:
    """The client's answer: `body`, or when its usage is not counts, the answer it is billed
    for without those numbers (a translated one was written from the counts read, as 0)."""
    if usage.invalid is None or translated:
        return body
    return orjson.dumps(without_bad_counts(parsed))
