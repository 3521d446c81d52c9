"""A hostile upstream: a raw-socket HTTP/1.1 server whose every answer is scripted byte by byte.

`HostileServer` runs in the test's own event loop (for tests of the transport itself);
`HostileUpstream` runs one on an event loop of its own thread, for a gateway served from
another thread. Either hands each request to a `Script`, which writes whatever bytes it
likes on the `Peer` (the accepted connection): lengths that lie, chunks that do not parse,
floods of headers, bytes after the answer, a reset in the middle of the body.

The server reads a request's head and its `content-length` body; with `at_head` it runs
the script as soon as the head has arrived, before the body is read (an early answer).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast


@dataclass(frozen=True, slots=True)
class Received:
    """One request as the server read it off the wire."""

    index: int
    """Its place among every request the server received (0, 1, ...)."""
    line: bytes
    headers: dict[str, str]
    """Names in lower case."""
    body: bytes


Script = Callable[["Peer", Received], Coroutine[Any, Any, None]]
"""What the server does with one request."""


class Peer(asyncio.Protocol):
    """One connection the server accepted."""

    def __init__(self, server: HostileServer) -> None:
        self.server = server
        self.requests = 0
        self.lost = asyncio.Event()
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._writable = asyncio.Event()
        self._writable.set()
        self._head: tuple[bytes, dict[str, str], int] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Count the connection."""
        # uvloop's transports do not subclass asyncio's, though they behave as them.
        self._transport = cast("asyncio.Transport", transport)
        self.server.peers.append(self)

    def connection_lost(self, exc: Exception | None) -> None:
        """Wake whoever waits for the close."""
        self.lost.set()
        self._writable.set()

    def pause_writing(self) -> None:
        """The client reads slower than the script writes."""
        self._writable.clear()

    def resume_writing(self) -> None:
        """The client caught up."""
        self._writable.set()

    def data_received(self, data: bytes) -> None:
        """Hand each complete request (or head, with `at_head`) to the script."""
        self._buffer += data
        while True:
            if self._head is None:
                end = self._buffer.find(b"\r\n\r\n")
                if end < 0:
                    return
                line, *fields = bytes(self._buffer[:end]).split(b"\r\n")
                headers = {
                    name.strip().lower(): value.strip()
                    for name, _, value in (f.decode("latin-1").partition(":") for f in fields)
                }
                del self._buffer[: end + 4]
                self._head = (line, headers, int(headers.get("content-length", "0")))
                if self.server.at_head:
                    self._start(line, headers, b"")
            line, headers, length = self._head
            if len(self._buffer) < length:
                return
            body = bytes(self._buffer[:length])
            del self._buffer[:length]
            self._head = None
            if not self.server.at_head:
                self._start(line, headers, body)

    def _start(self, line: bytes, headers: dict[str, str], body: bytes) -> None:
        server = self.server
        request = Received(len(server.requests), line, headers, body)
        server.requests.append(request)
        self.requests += 1
        server.tasks.append(asyncio.get_running_loop().create_task(server.script(self, request)))

    def write(self, data: bytes) -> None:
        """Send `data`, unless the connection is going."""
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.write(data)

    async def send(self, pieces: Iterable[bytes]) -> None:
        """Send each piece once the client has read enough of the last ones."""
        for piece in pieces:
            await self._writable.wait()
            if self.lost.is_set():
                return
            self.write(piece)

    def close(self) -> None:
        """Close after the written bytes are flushed."""
        if self._transport is not None:
            self._transport.close()

    def reset(self) -> None:
        """Close at once with a TCP reset, dropping what was not yet sent."""
        transport = self._transport
        if transport is None:
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()


@dataclass(eq=False)
class HostileServer:
    """A server on 127.0.0.1 in the running event loop; `async with serve(script)`."""

    script: Script
    at_head: bool = False
    port: int = 0
    peers: list[Peer] = field(default_factory=list)
    """Every connection accepted, in order."""
    requests: list[Received] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.port}"


@asynccontextmanager
async def serve(script: Script, *, at_head: bool = False) -> AsyncIterator[HostileServer]:
    """Run a `HostileServer` in the running loop for the block's length."""
    state = HostileServer(script, at_head)
    server = await asyncio.get_running_loop().create_server(lambda: Peer(state), "127.0.0.1", 0)
    state.port = server.sockets[0].getsockname()[1]
    try:
        yield state
    finally:
        for task in state.tasks:
            task.cancel()
        outcomes = await asyncio.gather(*state.tasks, return_exceptions=True)
        for peer in state.peers:
            peer.close()
        server.close()
        await server.wait_closed()
        # A script that broke is the test's fault, not the client's: say so.
        failures = [each for each in outcomes if isinstance(each, Exception)]
        if failures:
            raise failures[0]


class HostileUpstream:
    """A `HostileServer` on an event loop of its own thread; a context manager."""

    def __init__(self, script: Script, *, at_head: bool = False) -> None:
        self._script = script
        self._at_head = at_head
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="hostile-upstream", daemon=True)
        self.server: HostileServer | None = None
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        """The server's base URL."""
        assert self.server is not None
        return self.server.url

    @property
    def requests(self) -> list[Received]:
        """Every request received so far."""
        assert self.server is not None
        return self.server.requests

    def __enter__(self) -> HostileUpstream:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the hostile upstream did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        stop = self._stop
        if stop is not None:
            self._loop.call_soon_threadsafe(stop.set)
        self._thread.join(10)
        if self._error is not None and exc[0] is None:
            raise self._error

    def _run(self) -> None:
        self._loop.run_until_complete(self._main())
        self._loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        try:
            async with serve(self._script, at_head=self._at_head) as server:
                self.server = server
                self._ready.set()
                await self._stop.wait()
        except BaseException as error:  # reported to the test's thread
            self._error = error
            self._ready.set()


def answer(body: bytes, *fields: str, status: str = "200 OK") -> bytes:
    """An answer whose body is delimited by a content-length."""
    head = [f"HTTP/1.1 {status}", *fields, f"content-length: {len(body)}"]
    return "\r\n".join(head).encode() + b"\r\n\r\n" + body


CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ntransfer-encoding: chunked\r\n\r\n"
LAST_CHUNK = b"0\r\n\r\n"


def chunk(data: bytes) -> bytes:
    """One chunk of a chunked body."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def pieces(data: bytes, size: int = 256 * 1024) -> list[bytes]:
    """`data` cut into pieces of `size` bytes, to send with `Peer.send`."""
    return [data[start : start + size] for start in range(0, len(data), size)]
