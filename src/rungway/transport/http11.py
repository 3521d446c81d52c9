"""The gateway's upstream client: keep-alive HTTP/1.1 on asyncio protocols and httptools.

It carries every model request upstream (the engine's transport) and every read of a
plan's usage endpoint: the head and body written in one call, the answer parsed by
httptools (the parser the gateway's own server uses). Connections are kept per upstream
(scheme, host, port) and reused last-in first-out; one idle past `KEEPALIVE_S` is closed
rather than reused. It does only what the gateway needs, which makes a request cost
about a third of what a general client spends on it (`bench/http_cost.py`): no cookies,
redirects, proxies, compression or retries.

Timeouts: connect, first byte (from the request's write to the answer's head) and idle
(while a read of the body waits for data). Failures surface as the port's
`UpstreamTimeout` or `UpstreamUnreachable` (`rungway.engine.transport`), in the words a
user needs. Answers are asked for uncompressed, since the engine reads every one.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httptools
from multidict import CIMultiDict
from yarl import URL

from rungway.adapters.base import UpstreamRequest
from rungway.config import TimeoutSettings
from rungway.engine.transport import BODY_LIMIT, UpstreamTimeout, UpstreamUnreachable

KEEPALIVE_S = 30.0
"""How long an idle connection is kept for reuse."""
MAX_IDLE = 256
"""The most idle connections kept per upstream; more are closed as they come back."""
_PAUSE_AT = 256 * 1024
"""Buffered body bytes at which reading from the socket pauses until the reader catches up."""
_RESUME_AT = 64 * 1024
_FIXED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
"""Request headers this client writes itself."""


@dataclass(frozen=True, slots=True)
class _Target:
    """What a URL's requests need: the pool key, the address, and what follows the
    method in the request's head."""

    key: tuple[str, str, int]
    host: str
    port: int
    tls: bool
    start: str
    """The rest of the request line (` /path?query HTTP/1.1`) and the Host header."""


class _Lost(Exception):
    """The connection closed before the answer was whole; its message says how."""


class Http11Transport:
    """A keep-alive connection pool for all upstreams (a `Transport`)."""

    def __init__(self, timeouts: TimeoutSettings) -> None:
        self.timeouts = timeouts
        """The timeouts in force."""
        self._idle: dict[tuple[str, str, int], deque[_Connection]] = {}
        self._targets: dict[str, _Target] = {}
        self._tls: ssl.SSLContext | None = None
        self._open = False

    async def start(self) -> None:
        """Open the pool; call from inside the running event loop."""
        self._open = True

    async def close(self) -> None:
        """Close every idle connection; connections in use close as their answers end."""
        self._open = False
        for idle in self._idle.values():
            while idle:
                idle.pop().close()
        self._idle.clear()

    async def send(self, request: UpstreamRequest) -> Http11Response:
        """POST `request` and return once the answer's head has arrived."""
        return await self._request("POST", request.url, request.headers, request.body)

    async def get(
        self, url: str, headers: Mapping[str, str], deadline_s: float, body: bytes | None = None
    ) -> tuple[int, Mapping[str, str], bytes]:
        """GET `url` (a usage endpoint), or POST `body` to it when given (an endpoint read by
        POST), and read the whole answer within `deadline_s`; past it, `TimeoutError`."""
        method = "GET" if body is None else "POST"
        async with asyncio.timeout(deadline_s):
            response = await self._request(method, url, headers, body)
            return response.status, response.headers, await response.read()

    async def _request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes | None
    ) -> Http11Response:
        if not self._open:
            raise RuntimeError("Http11Transport.start() was not called")
        target = self._target(url)
        head = _head(method, target, headers, body)
        connection = self._reuse(target.key) or await self._connect(target)
        connection.begin()
        connection.transport.writelines((head, body or b""))
        try:
            status, answer = await connection.head(self.timeouts.first_byte_s)
        except BaseException:
            connection.close()
            raise
        return Http11Response(status, answer, connection, self, self.timeouts.idle_s)

    def give_back(self, connection: _Connection) -> None:
        """Keep a connection whose answer was read whole for the next request."""
        if not self._open or not connection.reusable():
            connection.close()
            return
        idle = self._idle.setdefault(connection.key, deque())
        if len(idle) >= MAX_IDLE:
            connection.close()
            return
        connection.idle_since = asyncio.get_running_loop().time()
        idle.append(connection)

    def _reuse(self, key: tuple[str, str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        if not idle:
            return None
        stale = asyncio.get_running_loop().time() - KEEPALIVE_S
        # The oldest are on the left: close those idle too long, then take the newest.
        while idle and idle[0].idle_since < stale:
            idle.popleft().close()
        while idle:
            connection = idle.pop()
            if connection.reusable():
                return connection
            connection.close()
        return None

    async def _connect(self, target: _Target) -> _Connection:
        loop = asyncio.get_running_loop()
        timeout = self.timeouts.connect_s
        tls = self._tls_context() if target.tls else None
        try:
            _, connection = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _Connection(target.key),
                    target.host,
                    target.port,
                    ssl=tls,
                    server_hostname=target.host if tls is not None else None,
                ),
                timeout,
            )
        except TimeoutError:
            raise UpstreamTimeout(f"could not connect within {timeout:g}s") from None
        except OSError as error:
            reason = error.strerror or str(error) or type(error).__name__
            raise UpstreamUnreachable(
                f"cannot connect to {target.host}:{target.port} ({reason})", reached=False
            ) from None
        return connection

    def _tls_context(self) -> ssl.SSLContext:
        # Made on the first TLS connection: loading the trust store costs some 30 ms,
        # which a gateway serving only local upstreams never needs.
        if self._tls is None:
            context = ssl.create_default_context()
            context.set_alpn_protocols(["http/1.1"])
            self._tls = context
        return self._tls

    def _target(self, url: str) -> _Target:
        target = self._targets.get(url)
        if target is None:
            if len(self._targets) >= 4096:  # URLs carrying model names are many, not endless
                self._targets.clear()
            target = self._targets[url] = _parse(url)
        return target


class Http11Response:
    """An answer's status and headers, and a handle to read its body (an `UpstreamResponse`)."""

    __slots__ = ("_connection", "_done", "_idle_s", "_pool", "headers", "status")

    def __init__(
        self,
        status: int,
        headers: Mapping[str, str],
        connection: _Connection,
        pool: Http11Transport,
        idle_s: float,
    ) -> None:
        self.status = status
        self.headers = headers
        self._connection = connection
        self._pool = pool
        self._idle_s = idle_s
        self._done = False

    async def read(self, limit: int = BODY_LIMIT) -> bytes:
        """The whole body, then release the connection; more than `limit` bytes is refused."""
        declared = _length(self.headers.get("content-length"))
        if declared is not None and declared > limit:
            self.close()
            raise UpstreamUnreachable(f"the upstream sent a {declared}-byte body (limit {limit})")
        connection = self._connection
        idle = f"no data for {self._idle_s:g}s while reading the body"
        try:
            while not connection.complete:
                if connection.buffered > limit:
                    break
                await connection.more(self._idle_s, idle)
        except _Lost as lost:
            self.close()
            raise UpstreamUnreachable(f"connection lost while reading the body: {lost}") from None
        except BaseException:
            self.close()
            raise
        body = connection.take()
        if len(body) > limit:
            self.close()
            raise UpstreamUnreachable(f"the upstream sent a {len(body)}-byte body (limit {limit})")
        self.release()
        return body

    async def next_chunk(self) -> bytes:
        """What has arrived of the body since the last call, waiting for some; empty at
        the end of the body."""
        connection = self._connection
        if not connection.buffered and not connection.complete:
            idle = f"the stream was idle for {self._idle_s:g}s"
            try:
                await connection.more(self._idle_s, idle)
            except _Lost as lost:
                raise UpstreamUnreachable(f"the stream was cut off: {lost}") from None
        return connection.take()

    def close(self) -> None:
        """Drop the connection (the body was not read to its end)."""
        if not self._done:
            self._done = True
            self._connection.close()

    def release(self) -> None:
        """Return the connection to the pool (the body was read to its end)."""
        if not self._done:
            self._done = True
            if self._connection.complete:
                self._pool.give_back(self._connection)
            else:
                self._connection.close()


class _Connection(asyncio.Protocol):
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
        self._lost: str | None = None

    # The request's side.

    def begin(self) -> None:
        """Get ready for a new answer; the request is written next."""
        self._busy = True
        self.complete = False
        self._delimited = self._keep_alive = False
        self._names = []
        self._head = self._loop.create_future()

    async def head(self, first_byte_s: float) -> tuple[int, CIMultiDict[str]]:
        """The answer's status and headers, within `first_byte_s`."""
        head = self._head
        assert head is not None
        timer = self._loop.call_later(first_byte_s, _late, head, first_byte_s)
        try:
            return await head
        except _Lost as lost:
            raise UpstreamUnreachable(str(lost)) from None
        finally:
            timer.cancel()

    async def more(self, idle_s: float, idle_message: str) -> None:
        """Wait until more of the body has arrived, or it has ended; `idle_message` is the
        timeout's when nothing arrives within `idle_s`. Raise `_Lost` when it never will."""
        if self._lost is not None:
            raise _Lost(self._lost)
        waiter = self._waiter = self._loop.create_future()
        timer = self._loop.call_later(idle_s, _idle, waiter, idle_message)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None

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
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as error:
            self._lose(f"the upstream's answer is not valid HTTP ({error})")
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        """End the answer: whole if the close delimits its body, else lost."""
        self.closed = True
        if not self._busy:
            return
        if self._head is not None and self._head.done() and not self._delimited:
            self._finish()
        else:
            self._lose("the upstream closed the connection")

    # httptools' callbacks.

    def on_header(self, name: bytes, value: bytes) -> None:
        """Collect a header."""
        key = name.decode("latin-1")
        if key.lower() in ("content-length", "transfer-encoding"):
            self._delimited = True
        self._names.append((key, value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        """Hand the head over, unless it is an interim (1xx) one."""
        status = self._parser.get_status_code()
        if status < 200:
            self._names, self._delimited = [], False
            return
        head = self._head
        if head is not None and not head.done():
            head.set_result((status, CIMultiDict(self._names)))

    def on_body(self, body: bytes) -> None:
        """Buffer body bytes, pausing the socket while the reader is far behind."""
        self._chunks.append(body)
        self.buffered += len(body)
        if self.buffered > _PAUSE_AT and not self._paused:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        """The answer is whole (an interim one is skipped)."""
        if self._parser.get_status_code() < 200:
            return
        self._keep_alive = self._parser.should_keep_alive()
        self._finish()

    def _finish(self) -> None:
        self.complete = True
        self._busy = False
        self._wake()

    def _lose(self, reason: str) -> None:
        self._lost = reason
        self._busy = False
        head = self._head
        if head is not None and not head.done():
            head.set_exception(_Lost(reason))
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(_Lost(reason))

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


def _parse(url: str) -> _Target:
    parsed = URL(url)
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError(f"not an http(s) URL: {url!r}")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    start = f" {parsed.raw_path_qs} HTTP/1.1\r\nHost: {parsed.host_port_subcomponent}\r\n"
    return _Target(
        (parsed.scheme, parsed.host, port), parsed.host, port, parsed.scheme == "https", start
    )


def _head(method: str, target: _Target, headers: Mapping[str, str], body: bytes | None) -> bytes:
    """The request's head: the request line, Host, its own headers, then the body's length
    (none for a request without a body)."""
    lines = [method, target.start]
    encoding = accept = False
    for name, value in headers.items():
        if "\r" in name or "\n" in name or "\r" in value or "\n" in value:
            raise ValueError(f"the upstream request header {name!r} holds a line break")
        lowered = name.lower()
        if lowered in _FIXED_HEADERS:
            continue
        encoding = encoding or lowered == "accept-encoding"
        accept = accept or lowered == "accept"
        lines.append(f"{name}: {value}\r\n")
    if not accept:
        lines.append("Accept: */*\r\n")
    if not encoding:
        lines.append("Accept-Encoding: identity\r\n")
    lines.append("\r\n" if body is None else f"Content-Length: {len(body)}\r\n\r\n")
    return "".join(lines).encode("utf-8")


def _length(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None
