"""The client connection deadlines and caps, as a uvicorn protocol class."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, Protocol

from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from rungway.protocol import anthropic_messages, gemini, openai_chat
from rungway.runner.joined_head import JoinedHeadProtocol


class ConnectionLimits(Protocol):
    """The client connection deadlines and caps (the config's `server` section has them)."""

    @property
    def header_timeout_s(self) -> float: ...
    @property
    def body_timeout_s(self) -> float: ...
    @property
    def max_header_bytes(self) -> int: ...
    @property
    def max_headers(self) -> int: ...
    @property
    def max_connections_per_client(self) -> int: ...


class _HeadRefused(Exception):
    """Raised inside a parser callback to stop parsing a head that is over its limits."""


def limited_protocol(settings: ConnectionLimits) -> type[JoinedHeadProtocol]:
    """The httptools protocol class with `settings`' deadlines and caps.

    uvicorn's httptools protocol has no deadline for a request's head or body (its
    keep-alive timer runs only between requests) and no cap on header count or size, so a
    client that trickles bytes, or sends thousands of headers, holds a connection and its
    memory for as long as it likes. This one adds, per connection:
    - a head deadline from the connection's start (or the first byte after a request,
      even a bare line break) to the end of its headers, and a body deadline from there to
      the end of its body; a request past either gets 408 and the connection is closed;
    - caps on the head's size and header count, 431 beyond them, checked as bytes arrive
      so an endless header is refused before it is held whole;
    - a cap on open connections per client address; one more is answered 429 and closed.
    Each answer is in the error shape of the API its path belongs to, when that is known.

    HTTP answers a connection's requests in order, so while an earlier request's answer
    is still being written, a pipelined request's deadlines wait for it to finish, and a
    refusal of its head stops reading and is written after that answer, never into it.

    This subclasses uvicorn's httptools protocol because uvicorn has no public API for any
    of it: no hooks per connection, per header or per body chunk, no head or body timeout
    settings, no header caps; its `http` setting, which takes a protocol class, is the one
    way in. It leans on that class's internals (the parser callbacks, `cycle`, `transport`,
    `flow`, `send_400_response`, `on_response_complete`), so an upgrade of the pinned
    uvicorn must be checked against them.
    """
    open_by_client: dict[str, int] = {}
    head_s, body_s = settings.header_timeout_s, settings.body_timeout_s
    head_late = f"the request headers did not arrive within {head_s:g}s"
    body_late = f"the request body did not arrive within {body_s:g}s"

    class LimitedHttpProtocol(JoinedHeadProtocol):
        """uvicorn's httptools protocol under the server settings' deadlines and caps."""

        _timer: asyncio.TimerHandle | None = None
        _address = ""
        _head_open = True
        _received = 0
        """Bytes received since the head began, parsed or not."""
        _head_bytes = 0
        """Bytes of the URL and headers parsed so far."""
        _header_count = 0
        _refusal: tuple[int, str] | None = None
        _refused = False
        _next: Callable[[], None] | None = None
        """What waits for `_behind`'s answer to be written: a deadline or a refusal."""
        _behind: RequestResponseCycle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            """Count the connection against its address, and start the head deadline."""
            super().connection_made(transport)
            self._address = self.client[0] if self.client else ""
            count = open_by_client.get(self._address, 0) + 1
            open_by_client[self._address] = count
            if count > settings.max_connections_per_client:
                self._refuse(
                    429,
                    f"too many connections from {self._address}: at most "
                    f"{settings.max_connections_per_client} may be open at once",
                )
                return
            self._arm_head()

        def connection_lost(self, exc: Exception | None) -> None:
            """Release the address's count and any deadline."""
            self._disarm()
            left = open_by_client.get(self._address, 1) - 1
            if left > 0:
                open_by_client[self._address] = left
            else:
                open_by_client.pop(self._address, None)
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            """Parse, then refuse a head that has grown past its size without ending."""
            if self._refused:
                return
            if self._head_open:
                self._received += len(data)
                # Any byte between requests starts the head deadline: the parser skips
                # line breaks there without beginning a message, and uvicorn has just
                # cancelled its keep-alive timer for them.
                if self._timer is None and self._next is None:
                    self._arm_head()
            super().data_received(data)
            if self._head_open and self._received > settings.max_header_bytes:
                self._refuse(431, _too_large(settings.max_header_bytes))

        def on_message_begin(self) -> None:
            """A new request: its head deadline starts with its first byte."""
            super().on_message_begin()
            if self._timer is None and self._next is None:
                self._arm_head()

        def on_url(self, url: bytes) -> None:
            """Keep the URL within the head's size."""
            self._count_head(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            """Keep the headers within their count and the head's size."""
            self._header_count += 1
            if self._header_count > settings.max_headers:
                self._refusal = (431, f"more than {settings.max_headers} request headers")
                raise _HeadRefused
            self._count_head(len(name) + len(value) + 4)
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            """The head is in: the body deadline starts."""
            # Before uvicorn makes this request's cycle, `cycle` is the one before it.
            earlier = self.cycle
            self._head_open = False
            self._received = self._head_bytes = self._header_count = 0
            self._disarm()
            if earlier is None or earlier.response_complete:
                self._arm(body_s, body_late, self.url)
            else:
                self._next = functools.partial(self._arm, body_s, body_late, self.url)
                self._behind = earlier
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            """The body is in; the next bytes start the next request's head."""
            self._disarm()
            self._head_open = True
            super().on_message_complete()

        def on_response_complete(self) -> None:
            """An answer is written: what waited for it starts now."""
            super().on_response_complete()
            after, behind = self._next, self._behind
            if after is not None and behind is not None and behind.response_complete:
                self._next = self._behind = None
                if not self.transport.is_closing():
                    # It replaces the idle timer uvicorn has just set: bytes are waiting.
                    self._unset_keepalive_if_required()
                    after()

        def send_400_response(self, msg: str) -> None:
            """A head refused by a callback gets its own status; anything else the 400,
            after any answer still being written."""
            if self._refusal is not None:
                self._refuse(*self._refusal)
                return
            self._refused = True
            self._disarm()
            earlier = self._earlier()
            if earlier is not None:
                self.flow.pause_reading()
            self._in_turn(earlier, super().send_400_response, msg)

        def _count_head(self, size: int) -> None:
            self._head_bytes += size
            if self._head_bytes > settings.max_header_bytes:
                self._refusal = (431, _too_large(settings.max_header_bytes))
                raise _HeadRefused

        def _earlier(self) -> RequestResponseCycle | None:
            """The earlier request whose answer is still being written while this head
            arrives, if any."""
            cycle = self.cycle
            if self._head_open and cycle is not None and not cycle.response_complete:
                return cycle
            return None

        def _in_turn(
            self, earlier: RequestResponseCycle | None, then: Callable[..., None], *args: Any
        ) -> None:
            """Call `then` now, or once `earlier`'s answer is written."""
            if earlier is None:
                then(*args)
            else:
                self._next, self._behind = functools.partial(then, *args), earlier

        def _arm_head(self) -> None:
            earlier = self.cycle
            if earlier is None or earlier.response_complete:
                self._arm(head_s, head_late, b"")
            else:
                self._next = functools.partial(self._arm, head_s, head_late, b"")
                self._behind = earlier

        def _arm(self, seconds: float, message: str, path: bytes) -> None:
            self._timer = self.loop.call_later(seconds, self._late, message, path)

        def _disarm(self) -> None:
            self._next = self._behind = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _late(self, message: str, path: bytes) -> None:
            self._timer = None
            cycle = self.cycle
            if not self._head_open and cycle is not None and cycle.response_started:
                # The app answered before the body was in: there is no 408 left to send.
                self.transport.close()
                return
            self._refuse(408, message, path.decode("latin-1"))

        def _refuse(self, status: int, message: str, path: str = "") -> None:
            """Answer `status` and close the connection, once any earlier answer is
            written; read nothing more. The app, if it runs, sees a disconnect."""
            if self._refused or self.transport.is_closing():
                return
            self._refused = True
            self._disarm()
            earlier = self._earlier()
            if earlier is not None:
                self.flow.pause_reading()
            self._in_turn(earlier, self._close_with, status, message, path)

        def _close_with(self, status: int, message: str, path: str) -> None:
            transport = self.transport
            if transport.is_closing():
                return
            # The app, if it runs, reads a disconnect once the transport is closed, and
            # whatever it writes after that goes nowhere.
            body = _error_body(status, message, path)
            reason = HTTPStatus(status).phrase.encode()
            transport.write(
                b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s"
                % (status, reason, len(body), body)
            )
            # Closing with unread bytes in the socket would reset the connection and could
            # destroy the answer before the client reads it: stop sending, drop whatever
            # still arrives for a moment, then close.
            if transport.can_write_eof():
                transport.write_eof()
            self.loop.call_later(_LINGER_S, transport.close)

    return LimitedHttpProtocol


_LINGER_S = 1.0


def _too_large(limit: int) -> str:
    return f"the request's headers are over {limit} bytes"


def _error_body(status: int, message: str, path: str) -> bytes:
    # The API is known from the path once the head is in; before that, OpenAI's shape.
    if path.startswith("/v1/messages"):
        return anthropic_messages.error_body(status, message)
    if path.startswith(("/v1beta/", "/v1/models/")):
        return gemini.error_body(status, message)
    return openai_chat.error_body(status, message)
