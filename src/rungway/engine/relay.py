"""Relaying one upstream stream to the client.

Until the first content event arrives, the relay holds back the upstream's preamble
(`message_start`, `ping`, an empty opening chunk) so the engine can still fall through to
another connection. From the first content event on, every event is forwarded as soon as
it is complete; a failure after that ends the stream with the ingress API's error event.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

from rungway.adapters.base import EventKind, StreamWatcher
from rungway.engine.upstream import UpstreamResponse, UpstreamTimeout, UpstreamUnreachable
from rungway.protocol.errors import StreamErrorEvent
from rungway.protocol.failures import Failure, FailureClass
from rungway.protocol.sse import SseEvent, SseSplitter

Translate = Callable[[SseEvent], bytes]
"""Turns one upstream event into the client's frames, when the two speak other APIs."""
Finish = Callable[[str, Failure | None], None]


class StreamRelay:
    """One upstream stream on its way to the client."""

    def __init__(
        self,
        response: UpstreamResponse,
        watcher: StreamWatcher,
        error_event: StreamErrorEvent,
        translate: Translate | None = None,
    ) -> None:
        self._response = response
        self._watcher = watcher
        self._error_event = error_event
        self._translate = translate
        self._splitter = SseSplitter()
        self._pending: list[bytes] = []
        self.committed_at: float | None = None

    @property
    def watcher(self) -> StreamWatcher:
        """The watcher that has seen every event so far."""
        return self._watcher

    async def prime(self) -> Failure | None:
        """Read up to the first content event; return the failure if one comes first."""
        committed = False
        while not committed:
            try:
                chunk = await self._response.next_chunk()
            except (UpstreamTimeout, UpstreamUnreachable) as error:
                self._response.close()
                return _transport_failure(error)
            if not chunk:
                self._response.close()
                return Failure(FailureClass.NETWORK, "the stream ended before any content")
            for event in self._splitter.feed(chunk):
                kind = self._watcher.see(event)
                if kind is EventKind.ERROR and not committed:
                    self._response.close()
                    return self._watcher.failure
                committed = committed or kind is EventKind.CONTENT
                self._pending.append(self._client_bytes(event, kind))
        self.committed_at = time.perf_counter()
        return None

    async def body(self, finish: Finish) -> AsyncIterator[bytes]:
        """The client's stream: held events first, then each event as it completes.

        `finish(outcome, failure)` runs exactly once, however the stream ends. When the
        stream ends with its last event or an error event, it runs before that event is
        passed on, so the request is recorded before the client can see the end.
        """
        watcher = self._watcher
        ended = ended_well = False

        def end(failure: Failure | None) -> None:
            nonlocal ended, ended_well
            if not ended:
                ended, ended_well = True, failure is None
                finish(failure.kind.value if failure is not None else "ok", failure)

        try:
            out = self._pending
            while True:
                if watcher.finished or watcher.failure is not None:
                    end(watcher.failure)
                data = b"".join(out)
                out.clear()
                if data:
                    yield data
                try:
                    chunk = await self._response.next_chunk()
                except (UpstreamTimeout, UpstreamUnreachable) as error:
                    failure = _transport_failure(error)
                    end(failure)
                    yield self._error_event(failure.message, failure.kind)
                    break
                if not chunk:
                    if not watcher.finished and watcher.failure is None:
                        failure = Failure(FailureClass.NETWORK, "the upstream stream ended early")
                        end(failure)
                        yield self._error_event(failure.message, failure.kind)
                    break
                for event in self._splitter.feed(chunk):
                    out.append(self._client_bytes(event, watcher.see(event)))
            end(watcher.failure)
        finally:
            if ended_well:
                self._response.release()
            else:
                self._response.close()
            if not ended:
                finish("client_closed", None)

    def _client_bytes(self, event: SseEvent, kind: EventKind) -> bytes:
        if self._translate is not None:
            # A translator reads every event, the usage chunk the client never sees included.
            return self._translate(event)
        return b"" if kind is EventKind.DROP else event.raw


def _transport_failure(error: UpstreamTimeout | UpstreamUnreachable) -> Failure:
    if isinstance(error, UpstreamTimeout):
        return Failure(FailureClass.TIMEOUT, str(error))
    return Failure(FailureClass.NETWORK, str(error))
