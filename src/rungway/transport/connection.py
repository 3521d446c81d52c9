"""One keep-alive connection to an upstream, and the answer it is reading (the protocol side
of `rungway.transport.http11`).

httptools parses what arrives; the body is buffered for the reader, who takes it piece by
piece (a stream) or whole (`read_whole`). An answer the client cannot trust ends the
connection, and the reason is the reader's error:

- a head over `HEAD_LIMIT` bytes (any interim 1xx heads before it counted in), or with
  more than `HEADER_LIMIT` fields: whatever an answer sends without a body byte (its head,
  chunk framing, trailers) is capped, so memory stays bounded whatever the upstream sends;
- a `101`: the upstream switched protocols instead of answering;
- what llhttp refuses: conflicting or invalid lengths, bad chunks, and obsolete line
  folding, which RFC 9112 deprecates and no API sends, so the value is not guessed at;
- bytes after a whole answer: the answer stands, but the connection carries no other.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httptools
from multidict import CIMultiDict

from rungway.engine.transport import UpstreamTimeout, UpstreamUnreachable

HEAD_LIMIT = 64 * 1024
"""The most bytes an answer may send before its body, or between body bytes (interim heads,
chunk framing, trailers), checked at each socket read (at most 256 KiB): curl allows
100 KiB of headers, Python's http.client 64 KiB a line, and an API's head is under 2 KiB."""
HEADER_LIMIT = 100
"""The most fields an answer's head may have, as Python's http.client allows."""
_PAUSE_AT = 256 * 1024
"""Buffered body bytes at which reading from the socket pauses until the reader catches up."""


class Lost(Exception):
    """The connection closed before the answer was whole; its message says how."""


class _Refused(Exception):
    """An answer the client will not read further; its message says why."""


class Connection(asyncio.Protocol):
    """One connection to an upstream, and the answer it is reading."""

    def __init__(self, key: tuple[str, str, int]) -> None:
        self.key = key
        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        self.idle_since = 0.0
        self.closed = False
        self.complete = False
        """The current answer has arrived whole."""
        self.buffered = 0
        """Body bytes received and not yet taken."""
        self._parser = httptools.HttpResponseParser(self)
        self._loop = asyncio.get_running_loop()
        self._busy = False
        self._chunks: list[bytes] = []
        self._names: list[tuple[str, str]] = []
        self._head: asyncio.Future[tuple[int, CIMultiDict[str]]] | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._delimited = False
        """The answer says where its body ends (a length, or chunks); else the close does."""
        self._keep_alive = False
        self._paused = False
        self._pause_at = _PAUSE_AT
        self._unread = 0
        """Bytes received since the last body bytes: the head, chunk framing, trailers."""
        self._interim = 0
        self._lost: str | None = None

    # The request's side.

    def begin(self) -> None:
        """Get ready for a new answer; the request is written next."""
        self._busy = True
        self.complete = False
        self._delimited = self._keep_alive = False
        self._names = []
        self._pause_at = _PAUSE_AT
        self._unread = self._interim = 0
        self._head = self._loop.create_future()

    async def head(self, first_byte_s: float) -> tuple[int, CIMultiDict[str]]:
        """The answer's status and headers, within `first_byte_s`."""
        head = self._head
        assert head is not None
        timer = self._loop.call_later(first_byte_s, _late, head, first_byte_s)
        try:
            return await head
        except Lost as lost:
            raise UpstreamUnreachable(str(lost)) from None
        finally:
            timer.cancel()

    async def more(self, idle_s: float, idle_message: str) -> None:
        """Wait until more of the body has arrived, or it has ended; `idle_message` is the
        timeout's when nothing arrives within `idle_s`. Raise `Lost` when it never will."""
        if self._lost is not None:
            raise Lost(self._lost)
        waiter = self._waiter = self._loop.create_future()
        timer = self._loop.call_later(idle_s, _idle, waiter, idle_message)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None

    def read_whole(self, limit: int) -> None:
        """The reader takes the body whole, up to `limit` bytes: keep reading until then
        rather than wait for it to take some."""
        self._pause_at = limit
        if self._paused:
            self._paused = False
            self.transport.resume_reading()

    def take(self) -> bytes:
        """The body bytes received since the last take."""
        chunks = self._chunks
        if not chunks:
            return b""
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self._chunks = []
        self.buffered = 0
        if self._paused:
            self._paused = False
            self.transport.resume_reading()
        return data

    def reusable(self) -> bool:
        """Whether a request can go on this connection: open, and its last answer whole
        with nothing after it."""
        return not self.closed and self._keep_alive and not self._busy

    def close(self) -> None:
        """Close the connection (an unfinished answer is abandoned)."""
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()

    # The protocol's side.

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport."""
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        """Parse what arrived; bytes with no request waiting for them spoil the connection."""
        if not self._busy:
            self.close()
            return
        self._unread += len(data)
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as error:
            self._refuse(error)
            return
        if self._unread > HEAD_LIMIT and not self.complete:
            # Checked after parsing: body bytes in the same read reset the count.
            self._end(self._too_long())

    def connection_lost(self, exc: Exception | None) -> None:
        """End the answer: whole if a clean close delimits its body, else lost."""
        self.closed = True
        if not self._busy:
            return
        head = self._head
        if exc is None and head is not None and head.done() and not self._delimited:
            self._finish()
        elif exc is not None:
            self._lose(f"the upstream reset the connection ({type(exc).__name__})")
        else:
            self._lose("the upstream closed the connection")

    # httptools' callbacks.

    def on_message_begin(self) -> None:
        """Refuse a second message in the bytes of one answer."""
        if self.complete:
            raise _Refused("bytes after the answer")

    def on_header(self, name: bytes, value: bytes) -> None:
        """Collect a header (counted at the head's end: `HEAD_LIMIT` bounds them till then)."""
        key = name.decode("latin-1")
        if key.lower() in ("content-length", "transfer-encoding"):
            self._delimited = True
        self._names.append((key, value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        """Hand the head over, unless it is an interim (1xx) one."""
        status = self._parser.get_status_code()
        if status < 200:
            if status == 101:
                raise _Refused("the upstream switched protocols (101) instead of answering")
            self._names, self._delimited = [], False
            self._interim += 1
            return
        names = self._names
        if len(names) > HEADER_LIMIT:
            raise _Refused(f"the upstream's answer has more than {HEADER_LIMIT} header fields")
        head = self._head
        if head is not None and not head.done():
            head.set_result((status, CIMultiDict(names)))

    def on_body(self, body: bytes) -> None:
        """Buffer body bytes, pausing the socket while the reader is far behind."""
        self._chunks.append(body)
        self.buffered += len(body)
        self._unread = 0
        if self.buffered > self._pause_at and not self._paused:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        """The answer is whole (an interim one is skipped)."""
        if self._parser.get_status_code() < 200:
            return
        self._keep_alive = self._parser.should_keep_alive()
        self._finish()

    def _refuse(self, error: Exception) -> None:
        if self.complete:
            # What follows a whole answer is no answer to anything: the answer stands, and
            # the connection, its framing now unknown, carries nothing more.
            self._keep_alive = False
            self.close()
            return
        cause = error.__context__
        if isinstance(cause, _Refused):
            self._end(str(cause))
        else:
            self._end(f"the upstream's answer is not valid HTTP ({error})")

    def _too_long(self) -> str:
        limit = f"over {HEAD_LIMIT // 1024} KiB"
        if self._head is not None and self._head.done():
            return f"the upstream sent {limit} of chunk framing or trailers and no body bytes"
        interim = f" (after {self._interim} interim 1xx answers)" if self._interim else ""
        return f"the upstream's answer has a head of {limit}{interim}"

    def _end(self, reason: str) -> None:
        self._lose(reason)
        self.close()

    def _finish(self) -> None:
        self.complete = True
        self._busy = False
        self._wake()

    def _lose(self, reason: str) -> None:
        self._lost = reason
        self._busy = False
        head = self._head
        if head is not None and not head.done():
            head.set_exception(Lost(reason))
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(Lost(reason))

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


def _late(head: asyncio.Future[Any], first_byte_s: float) -> None:
    if not head.done():
        head.set_exception(UpstreamTimeout(f"no response within {first_byte_s:g}s"))


def _idle(waiter: asyncio.Future[None], message: str) -> None:
    if not waiter.done():
        waiter.set_exception(UpstreamTimeout(message))
