"""Relaying one upstream stream to the client.

Until the first content event arrives, the relay holds back the upstream's preamble
(`message_start`, `ping`, an empty opening chunk) so the engine can still fall through to
another connection; a stream with no content within `timeouts.first_content_s` falls
through as a timeout. From the first content event on, every event is forwarded as soon
as it is complete; a failure after that, or a stream still going after
`timeouts.max_stream_s`, ends with the ingress API's error event.

The stream's budget hold is settled when the stream is recorded, and the stream is
recorded exactly once however it ends: whole, by an upstream failure, by a fault in the
gateway's own handling of an event, or by the client leaving, even before its first byte.
Only a stream whose terminator passed has reported its final usage and is settled by it;
any other was billed for an amount the gateway never read, and is settled at its hold.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable
from typing import Protocol

import orjson

from rungway.adapters.base import EventKind, StreamWatcher
from rungway.credentials.redaction import redact_bytes
from rungway.engine.transport import UpstreamResponse, UpstreamTimeout, UpstreamUnreachable
from rungway.protocol.errors import StreamErrorEvent
from rungway.protocol.failures import MALFORMED, Failure, FailureClass, UnreadableUpstream
from rungway.protocol.sse import SseEvent, SseSplitter, encode_event
from rungway.protocol.usage import ReportedUsage, without_bad_counts

Translate = Callable[[SseEvent], bytes]
"""Turns one upstream event into the client's frames, when the two speak other APIs."""
Unwrap = Callable[[SseEvent], SseEvent]
"""Takes one upstream event out of its envelope (`adapters.base.Enveloped`)."""
log = logging.getLogger("rungway.engine")


class StreamEnd(Protocol):
    """Where a relayed stream reports how it ended (the request's trail)."""

    def stream_ended(
        self,
        outcome: str,
        failure: Failure | None,
        usage: ReportedUsage,
        ttfb: float | None,
        *,
        finished: bool,
    ) -> None:
        """The stream ended with `outcome`; `usage` is what it reported, `ttfb` when its
        first content arrived, `finished` whether its own terminator had passed (else its
        usage is not the final one)."""


class StreamRelay:
    """One upstream stream on its way to the client."""

    def __init__(
        self,
        response: UpstreamResponse,
        watcher: StreamWatcher,
        error_event: StreamErrorEvent,
        translate: Translate | None = None,
        *,
        first_content_s: float = 300.0,
        max_stream_s: float = 3600.0,
        unwrap: Unwrap | None = None,
    ) -> None:
        self._response = response
        self._first_content_s = first_content_s
        self._max_stream_s = max_stream_s
        self._watcher = watcher
        self._error_event = error_event
        self._translate = translate
        # An enveloped upstream's events are unwrapped as they are split, so the relay's
        # own loop is the same for every upstream.
        self._splitter = SseSplitter() if unwrap is None else _UnwrappingSplitter(unwrap)
        self._pending: list[bytes] = []
        self.committed_at: float | None = None

    @property
    def watcher(self) -> StreamWatcher:
        """The watcher that has seen every event so far."""
        return self._watcher

    async def prime(self) -> Failure | None:
        """Read up to the first content event; return the failure if one comes first."""
        try:
            # Pings reset the upstream's idle timer; only this deadline ends a stream
            # that keeps the line alive without ever saying anything.
            async with asyncio.timeout(self._first_content_s):
                failure = await self._read_preamble()
        except TimeoutError:
            self._response.close()
            limit = self._first_content_s
            return Failure(
                FailureClass.TIMEOUT, f"no content within {limit:g}s of the stream's start"
            )
        except BaseException:
            self._response.close()
            raise
        if failure is not None:
            self._response.close()
            return failure
        self.committed_at = time.perf_counter()
        return None

    async def _read_preamble(self) -> Failure | None:
        committed = False
        while not committed:
            try:
                chunk = await self._response.next_chunk()
            except (UpstreamTimeout, UpstreamUnreachable) as error:
                return _transport_failure(error)
            if not chunk:
                return Failure(FailureClass.NETWORK, "the stream ended before any content")
            for event in self._splitter.feed(chunk):
                try:
                    kind = self._see(event)
                    if kind is EventKind.ERROR and not committed:
                        return self._watcher.failure
                    committed = committed or kind is EventKind.CONTENT
                    self._pending.append(self._client_bytes(event, kind))
                except UnreadableUpstream as error:
                    # Nothing has reached the client: the next candidate may serve it.
                    return _unreadable_failure(error)
        return None

    def body(self, end: StreamEnd) -> RelayBody:
        """The client's stream: held events first, then each event as it completes.

        `end.stream_ended` is called exactly once, however the stream ends, closing it
        before its first byte included. When the stream ends with its last event or an
        error event, it is called before that event is passed on, so the request is
        recorded before the client can see the end.
        """
        ending = _Ending(end, self._watcher, self.committed_at)
        return RelayBody(self._events(ending), ending, self._response.close)

    async def _events(self, ending: _Ending) -> AsyncGenerator[bytes]:
        watcher = self._watcher
        deadline = (self.committed_at or time.perf_counter()) + self._max_stream_s
        try:
            out = self._pending
            while True:
                if watcher.finished or watcher.failure is not None:
                    ending.end(watcher.failure)
                data = b"".join(out)
                out.clear()
                if data:
                    yield data
                if time.perf_counter() > deadline and not ending.ended:
                    limit = self._max_stream_s
                    failure = Failure(
                        FailureClass.TIMEOUT, f"the stream ran past its limit of {limit:g}s"
                    )
                    ending.end(failure)
                    yield self._error_event(failure.message, failure.kind)
                    break
                try:
                    chunk = await self._response.next_chunk()
                except (UpstreamTimeout, UpstreamUnreachable) as error:
                    failure = _transport_failure(error)
                    ending.end(failure)
                    yield self._error_event(failure.message, failure.kind)
                    break
                if not chunk:
                    if not watcher.finished and watcher.failure is None:
                        failure = Failure(FailureClass.NETWORK, "the upstream stream ended early")
                        ending.end(failure)
                        yield self._error_event(failure.message, failure.kind)
                    break
                stopped = self._feed(chunk, out)
                if stopped is not None:
                    failure, outcome = stopped
                    ending.end(failure, outcome=outcome)
                    # What came before the event that stopped it still reaches the client.
                    data = b"".join(out)
                    out.clear()
                    yield data + self._error_event(failure.message, failure.kind)
                    break
            ending.end(watcher.failure)
        finally:
            if ending.well:
                self._response.release()
            else:
                self._response.close()
            ending.end(None, outcome="client_closed")

    def _feed(self, chunk: bytes, out: list[bytes]) -> tuple[Failure, str | None] | None:
        """Pass one chunk's events into `out`; the failure that ends the stream, with its
        outcome when that is not the failure's own kind, or None to go on."""
        try:
            for event in self._splitter.feed(chunk):
                out.append(self._client_bytes(event, self._see(event)))
        except UnreadableUpstream as error:
            return _unreadable_failure(error), None
        except Exception as error:
            # A fault in the gateway's own handling of an event: the stream cannot go on,
            # and is recorded as broken rather than left to its hold's expiry.
            log.exception("the relay could not handle an upstream event")
            message = f"the gateway failed while relaying the stream ({type(error).__name__})"
            return Failure(FailureClass.SERVER, message), "gateway_error"
        return None

    def _see(self, event: SseEvent) -> EventKind:
        """The watcher's reading of `event`; raise UnreadableUpstream when the event is not
        one its API allows (the watcher parses what the upstream sent, as it came)."""
        try:
            return self._watcher.see(event)
        except MALFORMED as error:
            raise UnreadableUpstream.of(error) from error

    def _client_bytes(self, event: SseEvent, kind: EventKind) -> bytes:
        if self._translate is not None:
            # A translator reads every event, the usage chunk the client never sees included.
            data = self._translate(event)
        else:
            data = b"" if kind is EventKind.DROP else event.raw
            if data and self._watcher.usage.invalid is not None:
                # Once the usage is not counts, events pass without the numbers that are not.
                data = _without_bad_counts(event)
        # An upstream's error event can quote the credential it was sent.
        return redact_bytes(data) if kind is EventKind.ERROR else data


class _Ending:
    """Reports a stream's end once, with the first way it ended."""

    __slots__ = ("_committed_at", "_end", "_watcher", "ended", "well")

    def __init__(self, end: StreamEnd, watcher: StreamWatcher, committed_at: float | None) -> None:
        self._end = end
        self._watcher = watcher
        self._committed_at = committed_at
        self.ended = self.well = False

    def end(self, failure: Failure | None, *, outcome: str | None = None) -> None:
        """The stream ended with `failure` (None: well, unless `outcome` says otherwise)."""
        if not self.ended:
            self.ended, self.well = True, failure is None and outcome is None
            finish_outcome = outcome or (failure.kind.value if failure is not None else "ok")
            watcher = self._watcher
            self._end.stream_ended(
                finish_outcome,
                failure,
                watcher.usage,
                self._committed_at,
                finished=watcher.finished,
            )


class RelayBody:
    """The client's stream. Closing it ends the stream even before its first byte, when
    the generator inside has not started and its own clean-up would not run."""

    __slots__ = ("_close_upstream", "_ending", "_events")

    def __init__(
        self, events: AsyncGenerator[bytes], ending: _Ending, close_upstream: Callable[[], None]
    ) -> None:
        self._events = events
        self._ending = ending
        self._close_upstream = close_upstream

    def __aiter__(self) -> RelayBody:
        return self

    async def __anext__(self) -> bytes:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        """Stop the stream; record it as the client leaving if it had not ended."""
        try:
            await self._events.aclose()
        finally:
            if not self._ending.ended:
                self._close_upstream()
                self._ending.end(None, outcome="client_closed")


class _UnwrappingSplitter(SseSplitter):
    """Splits a stream into events, each taken out of its upstream's envelope."""

    __slots__ = ("_unwrap",)

    def __init__(self, unwrap: Unwrap) -> None:
        super().__init__()
        self._unwrap = unwrap

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """The complete events so far, unwrapped."""
        return [self._unwrap(event) for event in super().feed(chunk)]


def _without_bad_counts(event: SseEvent) -> bytes:
    try:
        parsed = orjson.loads(event.data)
    except orjson.JSONDecodeError:
        return event.raw
    return encode_event(without_bad_counts(parsed), event.event)


def _transport_failure(error: UpstreamTimeout | UpstreamUnreachable) -> Failure:
    if isinstance(error, UpstreamTimeout):
        return Failure(FailureClass.TIMEOUT, str(error))
    return Failure(FailureClass.NETWORK, str(error))


def _unreadable_failure(error: UnreadableUpstream) -> Failure:
    return Failure(FailureClass.SERVER, f"the upstream's stream cannot be read: {error}")
