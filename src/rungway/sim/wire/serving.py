"""Serving one generation request, whatever the wire API: faults, credits, quota
admission, pacing, streaming, the tally and the log of served replies.

Each wire API supplies a `Dialect` that parses its requests and renders its replies,
errors and stream frames; this module owns the order of events, which is the same for
all of them (docs/provider-signals.md, Appendix: "mock-fidelity checklist").
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from rungway.protocol.asgi import Receive, Scope, Send
from rungway.sim.exchange import (
    Header,
    RecordedRequest,
    Reply,
    drop_connection,
    end_stream,
    mixed_case,
    send_chunk,
    send_reply,
    start_stream,
    wait_for_disconnect,
)
from rungway.sim.faults import (
    DisconnectFault,
    Fault,
    FaultQueue,
    GarbageFault,
    HttpErrorFault,
    QuotaExhaustedFault,
    StallFault,
    StreamErrorFault,
    TimeoutFault,
)
from rungway.sim.prompt_cache import Boundary, CacheRules, CacheUse, PromptCache
from rungway.sim.quota.header_families import header_writer
from rungway.sim.quota.windows import Admission, QuotaBook
from rungway.sim.scenario import Scenario
from rungway.sim.tally import Tally
from rungway.sim.wire.completion import NO_TOOLS, Completion, ToolCall, ToolTurn, plan_completion


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """A validated generation request: what the serving flow needs from any wire API."""

    model: str
    stream: bool
    max_tokens: int | None
    input_tokens: int
    body: Mapping[str, Any]
    request_id: str
    tools: ToolTurn = NO_TOOLS
    cache_rules: CacheRules | None = None
    """How the provider caches this request's prompt (None: it is not cached)."""
    boundaries: tuple[Boundary, ...] = ()
    """Where a cached prefix of the prompt may end (empty when it is too short to cache)."""


@dataclass(frozen=True, slots=True)
class ServedReply:
    """What the simulated model answered to one admitted generation request.

    `tool_result` is the part of the request's tool result the reply quotes; `delivered`
    is False when a fault cut the reply short.
    """

    model: str
    stream: bool
    text: str
    tool_call: ToolCall | None
    tool_result: str | None
    delivered: bool


# Like recorded requests, served replies are capped so long runs keep a bounded log.
MAX_SERVED_REPLIES = 10_000


class ReplyLog:
    """The replies one upstream served, oldest first; safe to read from another thread."""

    __slots__ = ("_lock", "_replies")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._replies: deque[ServedReply] = deque(maxlen=MAX_SERVED_REPLIES)

    def add(self, reply: ServedReply) -> None:
        """Append one reply."""
        with self._lock:
            self._replies.append(reply)

    def all(self) -> list[ServedReply]:
        """Every reply kept so far."""
        with self._lock:
            return list(self._replies)

    def clear(self) -> None:
        """Forget every reply."""
        with self._lock:
            self._replies.clear()


@dataclass(frozen=True, slots=True)
class _CacheLookup:
    """A request's prompt-cache use, with the account and instant it was looked up at and
    the input its token quota windows count."""

    account: str
    now: float
    use: CacheUse
    charged: int


class Dialect(Protocol):
    """How one wire API parses generation requests and renders what the upstream sends."""

    def parse_generation(self, request: RecordedRequest) -> GenerationRequest | Reply:
        """Validate auth, headers and body; an error `Reply` when the request is refused."""
        ...

    def http_error(self, fault: HttpErrorFault, request_id: str) -> Reply:
        """The provider's error response for an injected HTTP error."""
        ...

    def quota_rejection(self, request: GenerationRequest, admission: Admission) -> Reply:
        """The provider's 429 for a request refused by an exhausted window."""
        ...

    def message(self, request: GenerationRequest, completion: Completion) -> Reply:
        """The non-streamed success response."""
        ...

    def stream_head(self, request: GenerationRequest) -> list[Header]:
        """Headers (besides content type and quota) of a streamed success response."""
        ...

    def stream_frames(self, request: GenerationRequest, completion: Completion) -> list[bytes]:
        """Every SSE frame of a complete stream, terminator included, in order."""
        ...

    def stream_error_frame(
        self, request: GenerationRequest, fault: StreamErrorFault, sent: int
    ) -> bytes:
        """The in-stream error event the provider sends inside a 200 stream, after `sent`
        frames of it."""
        ...

    def keepalive_frame(self) -> bytes:
        """What the provider sends to keep a quiet stream open."""
        ...


class Billing(Protocol):
    """Credits a request must be able to pay for before it is served (OpenRouter)."""

    def refusal(self, model: str, input_tokens: int, output_tokens: int) -> Reply | None:
        """The refusal when a reply for `model` with this usage cannot be paid for, else None."""
        ...

    def settle(self, model: str, input_tokens: int, output_tokens: int) -> None:
        """Charge a reply that was delivered whole."""
        ...


class GenerationService:
    """Runs generation requests for one dialect against the shared sim state."""

    __slots__ = (
        "_billing",
        "_book",
        "_dialect",
        "_faults",
        "_first_byte_s",
        "_headers",
        "_interval_s",
        "_scenario",
        "_sent",
        "_tally",
        "prompt_cache",
        "replies",
    )

    def __init__(
        self,
        scenario: Scenario,
        dialect: Dialect,
        book: QuotaBook,
        faults: FaultQueue,
        tally: Tally,
        *,
        billing: Billing | None = None,
    ) -> None:
        self._scenario = scenario
        self._dialect = dialect
        self._book = book
        self._faults = faults
        self._tally = tally
        self._billing = billing
        self._headers = header_writer(scenario)
        self._first_byte_s = scenario.response.first_byte_ms / 1000
        self._interval_s = scenario.response.chunk_interval_ms / 1000
        self._sent = 0
        self.replies = ReplyLog()
        # Each simulated upstream is one account; the cache also keys by credential, so an
        # upstream that accepts any credential still keeps each one's prefixes apart.
        self.prompt_cache = PromptCache()

    def _cased(self) -> bool:
        # Every other response spells its rate-limit header names with capitals, because
        # real upstreams do both and clients must parse either.
        self._sent += 1
        return self._sent % 2 == 0

    async def _send(self, send: Send, reply: Reply) -> None:
        await send_reply(send, reply, cased=self._cased())

    async def serve(
        self, scope: Scope, receive: Receive, send: Send, recorded: RecordedRequest
    ) -> None:
        """Answer one generation request end to end."""
        parsed = self._dialect.parse_generation(recorded)
        if isinstance(parsed, Reply):
            await self._send(send, parsed)
            return
        request = parsed
        fault = self._faults.take(request.model, request.stream)
        if isinstance(fault, HttpErrorFault | StreamErrorFault) and fault.echo_credential:
            fault = fault.model_copy(update={"message": _echoed(fault.message, recorded)})
        if fault is not None and await self._answered_by(fault, request, scope, receive, send):
            return

        completion = plan_completion(
            self._scenario.response, request.input_tokens, request.max_tokens, request.tools
        )
        unpaid = None
        if self._billing is not None:
            tokens = completion.input_tokens, completion.output_tokens
            unpaid = self._billing.refusal(request.model, *tokens)
        if unpaid is not None:
            # Refused before admission, so no window is charged either.
            await self._send(send, unpaid)
            return
        cached = self._cache_use(request, recorded, completion.input_tokens)
        if isinstance(fault, QuotaExhaustedFault) and not self._scenario.windows:
            # No window to fill: answer the way an exhausted upstream would anyway.
            admission = Admission(False, (), self._book.peek(request.model).now)
        else:
            charged = completion.input_tokens if cached is None else cached.charged
            admission = self._book.admit(request.model, charged, completion.output_tokens)
        quota = tuple(self._headers(admission))
        if not admission.admitted:
            reply = self._dialect.quota_rejection(request, admission)
            await self._send(send, Reply(reply.status, reply.body, reply.headers, quota))
            return
        if cached is not None:
            use = cached.use
            self.prompt_cache.keep(cached.account, request.model, use, cached.now)
            completion = replace(
                completion,
                cache_read_tokens=use.read_tokens,
                cache_write_5m_tokens=use.written_5m_tokens,
                cache_write_1h_tokens=use.written_1h_tokens,
            )

        if not request.stream:
            # A whole reply arrives when the last chunk would have.
            chunks = math.ceil(completion.output_tokens / self._scenario.response.chunk_tokens)
            delay = self._first_byte_s + self._interval_s * max(0, chunks - 1)
            if delay:
                await asyncio.sleep(delay)
            reply = self._dialect.message(request, completion)
            await self._send(send, Reply(reply.status, reply.body, reply.headers, quota))
            self._record(request, completion, delivered=True)
            return
        cut = fault if isinstance(fault, DisconnectFault | StreamErrorFault | StallFault) else None
        delivered = await self._stream(
            scope, receive, send, request=request, completion=completion, quota=quota, cut=cut
        )
        self._record(request, completion, delivered=delivered)

    def _cache_use(
        self, request: GenerationRequest, recorded: RecordedRequest, input_tokens: int
    ) -> _CacheLookup | None:
        """What the request reads from and writes to its account's prompt cache; None for
        a prompt that cannot be cached (most short ones), at no cost."""
        rules = request.cache_rules
        if rules is None or not request.boundaries:
            return None
        account = _account(recorded)
        now = self._book.clock.now()
        use = self.prompt_cache.look(
            account, request.model, request.boundaries, input_tokens, rules=rules, now=now
        )
        return _CacheLookup(account, now, use, use.charged_input(rules.read_weight))

    async def _answered_by(
        self,
        fault: Fault,
        request: GenerationRequest,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> bool:
        """Apply what `fault` does before admission; True when that already ended the request."""
        if isinstance(fault, TimeoutFault):
            # A client that gives up meanwhile gets nothing more.
            return await wait_for_disconnect(receive, fault.delay_s)
        if isinstance(fault, HttpErrorFault):
            reply = self._dialect.http_error(fault, request.request_id)
            if fault.quota_headers:
                readings = self._book.peek(request.model)
                quota = tuple(self._headers(readings))
                reply = Reply(reply.status, reply.body, reply.headers, quota)
            await self._send(send, reply)
            return True
        if isinstance(fault, GarbageFault):
            await self._send(send, Reply(200, fault.body.encode()))
            return True
        if isinstance(fault, DisconnectFault) and not request.stream:
            await drop_connection(scope, receive)
            return True
        if isinstance(fault, QuotaExhaustedFault):
            self._book.exhaust(request.model, fault.window)
        return False

    async def _stream(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        *,
        request: GenerationRequest,
        completion: Completion,
        quota: tuple[Header, ...],
        cut: DisconnectFault | StreamErrorFault | StallFault | None,
    ) -> bool:
        """Stream the reply; True when it was delivered whole."""
        frames = self._dialect.stream_frames(request, completion)
        if cut is not None:
            # A cut stream never reaches its terminator.
            frames = frames[: min(cut.after_events, len(frames) - 1)]
        head = self._dialect.stream_head(request)
        head.extend(mixed_case(quota) if self._cased() else quota)
        if self._first_byte_s:
            await asyncio.sleep(self._first_byte_s)
        await start_stream(send, head)
        if self._interval_s:
            for index, frame in enumerate(frames):
                if index:
                    await asyncio.sleep(self._interval_s)
                await send_chunk(send, frame)
        elif frames:
            await send_chunk(send, b"".join(frames))
        if isinstance(cut, StallFault):
            await self._stall(cut, send, receive)
        if isinstance(cut, DisconnectFault | StallFault):
            await drop_connection(scope, receive)
            return False
        if isinstance(cut, StreamErrorFault):
            await send_chunk(send, self._dialect.stream_error_frame(request, cut, len(frames)))
            await end_stream(send)
            return False
        await end_stream(send)
        return True

    async def _stall(self, fault: StallFault, send: Send, receive: Receive) -> None:
        """Keep-alives only, until the fault's time is up or the client leaves."""
        frame = self._dialect.keepalive_frame()
        deadline = asyncio.get_running_loop().time() + fault.duration_s
        while asyncio.get_running_loop().time() < deadline:
            await send_chunk(send, frame)
            if await wait_for_disconnect(receive, fault.interval_s):
                return

    def _record(
        self, request: GenerationRequest, completion: Completion, *, delivered: bool
    ) -> None:
        self.replies.add(
            ServedReply(
                model=request.model,
                stream=request.stream,
                text=completion.text,
                tool_call=completion.tool_call,
                tool_result=completion.quoted_result,
                delivered=delivered,
            )
        )
        if not delivered:
            # A reply cut short by a fault is not billed.
            return
        self._tally.record(
            request.model,
            completion.input_tokens,
            completion.output_tokens,
            cache_read_tokens=completion.cache_read_tokens,
            cache_write_tokens=completion.cache_write_tokens,
        )
        if self._billing is not None:
            self._billing.settle(request.model, completion.input_tokens, completion.output_tokens)


def _account(recorded: RecordedRequest) -> str:
    """The credential a request presented: what tells one account's cache from another's."""
    key = recorded.header("x-api-key") or recorded.header("x-goog-api-key")
    if key:
        return key
    authorization = recorded.header("authorization")
    if authorization:
        return authorization.strip().partition(" ")[2].strip() or authorization
    for part in recorded.query.split("&"):
        name, _, value = part.partition("=")
        if name == "key" and value:
            return value
    return ""


def _echoed(message: str | None, recorded: RecordedRequest) -> str:
    """An error message that quotes, whole, the credential the request presented."""
    scheme, _, token = (recorded.header("authorization") or "").strip().partition(" ")
    key = recorded.header("x-api-key") or recorded.header("x-goog-api-key")
    sent = token.strip() if token.strip() else key or scheme
    return f"{message or 'Incorrect API key provided'}: {sent or '(none)'}"
