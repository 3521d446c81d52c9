"""Running an ASGI app under uvicorn: in the foreground, or in a background thread.

The gateway and the simulated upstreams share this, so the demo, the tests and the
benchmarks start servers the same way: uvloop, httptools, no access log.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from http import HTTPStatus
from types import TracebackType
from typing import Any, Protocol, Self

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from rungway.protocol import anthropic_messages, gemini, openai_chat


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


def uvicorn_config(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    limits: ConnectionLimits | None = None,
    **extra: Any,
) -> uvicorn.Config:
    """The server settings every rungway process uses; `limits` cut off slow, oversized
    and too many client connections (see `limited_protocol`)."""
    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "loop": "uvloop",
        "http": JoinedHeadProtocol,
        # No route takes a websocket: an upgrade is answered as plain HTTP, and the
        # websockets library (some 10 ms of every start) is never imported.
        "ws": "none",
        "lifespan": "on",
        "access_log": False,
        # No proxy in front is assumed: the client address is never used, so skip the
        # middleware that would rewrite it on every request.
        "proxy_headers": False,
        "server_header": False,
        "log_level": "warning",
        "timeout_graceful_shutdown": 2,
    }
    if limits is not None:
        options["http"] = limited_protocol(limits)
    options.update(extra)
    return uvicorn.Config(app, **options)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on `host:port` (0 picks a free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


class BackgroundServer:
    """An ASGI app served from a daemon thread; `start()` returns its base URL."""

    def __init__(self, config: uvicorn.Config, name: str) -> None:
        self._config = config
        self._name = name
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def start(self) -> str:
        """Bind, serve, and wait until the server accepts connections."""
        if self._server is not None:
            raise RuntimeError(f"{self._name} is already running")
        sock = bind(self._config.host, self._config.port)
        server = uvicorn.Server(self._config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name=self._name, daemon=True
        )
        thread.start()
        deadline = time.monotonic() + 15
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                sock.close()
                raise RuntimeError(f"{self._name} did not start")
            time.sleep(0.002)
        host, port = sock.getsockname()[:2]
        host = f"[{host}]" if ":" in host else host
        self._server, self._thread, self.url = server, thread, f"http://{host}:{port}"
        return self.url

    def stop(self) -> None:
        """Ask the server to finish and wait for its thread."""
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(timeout=15)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class JoinedHeadProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, writing a response's head and body in one call.

    uvicorn writes a response's head the moment the app starts the response, and the body
    when it comes: two socket writes, and two segments for the client to read, for a
    reply whose body follows at once. Each request's writes go through a `_JoinedHead`
    instead, which holds a head that announces a length until the body's first bytes.
    It leans on uvicorn's `cycle.transport`, so an upgrade of the pinned uvicorn must be
    checked against it.
    """

    def on_headers_complete(self) -> None:
        """Give the request's cycle a transport that joins the head to the body."""
        super().on_headers_complete()
        cycle = self.cycle
        # The new request's cycle, unless the head asked for an upgrade (there is none). A
        # HEAD request's answer is its head alone: uvicorn writes no body to join it to.
        if (
            cycle is not None
            and cycle.transport is self.transport
            and cycle.scope["method"] != "HEAD"
        ):
            cycle.transport = _JoinedHead(self.transport)


class _JoinedHead(asyncio.Transport):
    """A response's transport that holds its head, when the head announces a
    `content-length`, until the body's first write, then writes both at once; every other
    write passes straight on.

    A streamed (chunked) response has its head written at once, as has a `100 Continue`:
    the client may be waiting on them.
    """

    __slots__ = ("_head", "_transport", "_waiting")

    def __init__(self, transport: asyncio.Transport) -> None:
        super().__init__()
        self._transport = transport
        self._head: bytes | None = None
        self._waiting = True
        """No final head has been written yet."""

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Hold the response's head if it announces a length; write anything else, after a
        held head."""
        head = self._head
        if head is not None:
            self._head = None
            self._transport.writelines((head, data))
            return
        # uvicorn writes each head whole, starting with its status line; an interim
        # `HTTP/1.1 1xx` head is not the response's.
        if self._waiting and isinstance(data, bytes) and data[:10] in _FINAL_HEADS:
            self._waiting = False
            if _LENGTH in data:
                self._head = data
                return
        self._transport.write(data)

    def close(self) -> None:
        """Write a held head (the response went no further), then close."""
        head, self._head = self._head, None
        if head is not None:
            self._transport.write(head)
        self._transport.close()

    def is_closing(self) -> bool:
        """Whether the connection is closing."""
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """The connection's extra info."""
        return self._transport.get_extra_info(name, default)


_FINAL_HEADS = frozenset(b"HTTP/1.1 %d" % digit for digit in range(2, 6))
_LENGTH = b"\r\ncontent-length: "
"""How uvicorn writes a head's length header (it lower-cases every name)."""


class _HeadRefused(Exception):
    """Raised inside a parser callback to stop parsing a head that is over its limits."""


def limited_protocol(settings: ConnectionLimits) -> type[JoinedHeadProtocol]:
    """The httptools protocol class with `settings`' deadlines and caps.

    uvicorn's httptools protocol has no deadline for a request's head or body (its
    keep-alive timer runs only between requests) and no cap on header count or size, so a
    client that trickles bytes, or sends thousands of headers, holds a connection and its
    memory for as long as it likes. This one adds, per connection:
    - a head deadline from the connection's start (or the next request's first byte) to
      the end of its headers, and a body deadline from there to the end of its body; a
      request past either gets 408 and the connection is closed;
    - caps on the head's size and header count, 431 beyond them, checked as bytes arrive
      so an endless header is refused before it is held whole;
    - a cap on open connections per client address; one more is answered 429 and closed.
    Each answer is in the error shape of the API its path belongs to, when that is known.

    This subclasses uvicorn's httptools protocol because uvicorn has no public API for any
    of it: no hooks per connection, per header or per body chunk, no head or body timeout
    settings, no header caps; its `http` setting, which takes a protocol class, is the one
    way in. It leans on that class's internals (the parser callbacks, `cycle`, `transport`,
    `send_400_response`), so an upgrade of the pinned uvicorn must be checked against them.
    """
    open_by_client: dict[str, int] = {}

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
            self._arm(settings.header_timeout_s, "request headers", "")

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
            super().data_received(data)
            if self._head_open and self._received > settings.max_header_bytes:
                self._refuse(431, _too_large(settings.max_header_bytes))

        def on_message_begin(self) -> None:
            """A new request: its head deadline starts with its first byte."""
            super().on_message_begin()
            if self._timer is None:
                self._arm(settings.header_timeout_s, "request headers", "")

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
            self._head_open = False
            self._received = self._head_bytes = self._header_count = 0
            self._disarm()
            self._arm(settings.body_timeout_s, "request body", self.url.decode("latin-1"))
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            """The body is in; the next bytes start the next request's head."""
            self._disarm()
            self._head_open = True
            super().on_message_complete()

        def send_400_response(self, msg: str) -> None:
            """A head refused by a callback gets its own status; anything else the 400."""
            if self._refusal is not None:
                self._refuse(*self._refusal)
            else:
                super().send_400_response(msg)

        def _count_head(self, size: int) -> None:
            self._head_bytes += size
            if self._head_bytes > settings.max_header_bytes:
                self._refusal = (431, _too_large(settings.max_header_bytes))
                raise _HeadRefused

        def _arm(self, seconds: float, what: str, path: str) -> None:
            message = f"the {what} did not arrive within {seconds:g}s"
            self._timer = self.loop.call_later(seconds, self._late, message, path)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _late(self, message: str, path: str) -> None:
            self._timer = None
            cycle = self.cycle
            if cycle is not None and cycle.response_started:
                self.transport.close()
                return
            self._refuse(408, message, path)

        def _refuse(self, status: int, message: str, path: str = "") -> None:
            """Answer `status` now and close the connection; the app sees a disconnect."""
            self._disarm()
            transport = self.transport
            if self._refused or transport.is_closing():
                return
            self._refused = True
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
