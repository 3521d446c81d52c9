"""The contract every upstream transport keeps, whatever HTTP client it is built on.

Each test runs the gateway's transport (`rungway.transport.http11`) against a raw asyncio
server in the same event loop, so the test controls every byte the transport reads, and
sees every byte it writes. The transport is reached only through the port
(`rungway.engine.transport`): `send` a request, then read its `UpstreamResponse`, and fail
as `UpstreamTimeout` or `UpstreamUnreachable` in the words the gateway relays to users.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import pytest
import uvloop

from rungway.adapters.base import UpstreamRequest
from rungway.config import TimeoutSettings
from rungway.engine.transport import UpstreamResponse, UpstreamTimeout, UpstreamUnreachable
from rungway.transport.http11 import Http11Transport

JSON = b'{"id":"chatcmpl-1","usage":{"prompt_tokens":3,"completion_tokens":2}}'


# The transports under test.


class _Transport(Protocol):
    """What the gateway does with a transport: start it, send through it, close it."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def send(self, request: UpstreamRequest) -> UpstreamResponse: ...


_Factory = Callable[[TimeoutSettings], _Transport]


@pytest.fixture
def make() -> _Factory:
    """The transport class under test (called with its `TimeoutSettings`)."""
    return Http11Transport


def _run(scenario: Coroutine[Any, Any, None]) -> None:
    # A transport that hangs fails its test in seconds rather than at the suite's timeout.
    uvloop.run(asyncio.wait_for(scenario, 10))


@asynccontextmanager
async def _client(
    make: _Factory, timeouts: TimeoutSettings | None = None
) -> AsyncIterator[_Transport]:
    transport = make(timeouts or TimeoutSettings())
    await transport.start()
    try:
        yield transport
    finally:
        await transport.close()


# The upstream: a raw HTTP/1.1 server that hands each request to the test's handler.


@dataclass(slots=True)
class _Request:
    """One request as the server read it off the wire."""

    index: int
    """Its place among every request the server received (0, 1, ...)."""
    line: bytes
    head: bytes
    headers: list[tuple[str, str]]
    """Names in lower case, values as sent."""
    body: bytes

    def header(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name.lower()]


_Handler = Callable[["_Conn", _Request], Coroutine[Any, Any, None]]


class _Conn(asyncio.Protocol):
    """One connection the server accepted."""

    def __init__(self, server: _Server) -> None:
        self.server = server
        self.received = bytearray()
        """Every byte the client sent on this connection."""
        self.lost = asyncio.Event()
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio's, though they behave as them.
        self._transport = cast("asyncio.Transport", transport)
        self.server.conns.append(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.set()

    def data_received(self, data: bytes) -> None:
        self.received += data
        self._buffer += data
        while (end := self._buffer.find(b"\r\n\r\n")) >= 0:
            head = bytes(self._buffer[:end])
            line, *fields = head.split(b"\r\n")
            headers = [
                (name.strip().lower(), value.strip())
                for name, _, value in (f.decode("latin-1").partition(":") for f in fields)
            ]
            length = int(next((v for k, v in headers if k == "content-length"), "0"))
            if len(self._buffer) < end + 4 + length:
                return
            body = bytes(self._buffer[end + 4 : end + 4 + length])
            del self._buffer[: end + 4 + length]
            request = _Request(len(self.server.requests), line, head, headers, body)
            self.server.requests.append(request)
            task = asyncio.get_running_loop().create_task(self.server.handler(self, request))
            self.server.tasks.append(task)

    def write(self, data: bytes) -> None:
        assert self._transport is not None
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        """Close after the written bytes are flushed."""
        assert self._transport is not None
        self._transport.close()

    def abort(self) -> None:
        assert self._transport is not None
        self._transport.abort()


@dataclass(eq=False)
class _Server:
    handler: _Handler
    port: int = 0
    conns: list[_Conn] = field(default_factory=list)
    """Every connection accepted, in order; `len(conns)` counts `connection_made`."""
    requests: list[_Request] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def protocol(self) -> _Conn:
        return _Conn(self)


@asynccontextmanager
async def _serve(handler: _Handler) -> AsyncIterator[_Server]:
    state = _Server(handler)
    server = await asyncio.get_running_loop().create_server(state.protocol, "127.0.0.1", 0)
    state.port = server.sockets[0].getsockname()[1]
    try:
        yield state
    finally:
        for task in state.tasks:
            task.cancel()
        outcomes = await asyncio.gather(*state.tasks, return_exceptions=True)
        for conn in state.conns:
            conn.abort()
        server.close()
        await server.wait_closed()
        # A handler that broke is the test's fault, not the transport's: say so.
        failures = [o for o in outcomes if isinstance(o, Exception)]
        if failures:
            raise failures[0]


def _request(
    server: _Server,
    path: str = "/v1/chat/completions",
    headers: dict[str, str] | None = None,
    body: bytes = b'{"model":"m"}',
) -> UpstreamRequest:
    if headers is None:
        headers = {"content-type": "application/json"}
    return UpstreamRequest(f"http://127.0.0.1:{server.port}{path}", headers, body)


def _fixed(body: bytes, *fields: str, status: str = "200 OK") -> bytes:
    """An answer whose body is delimited by content-length."""
    head = [f"HTTP/1.1 {status}", *fields, f"content-length: {len(body)}"]
    return "\r\n".join(head).encode() + b"\r\n\r\n" + body


_CHUNKED_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)
_LAST_CHUNK = b"0\r\n\r\n"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _answering(answer: bytes) -> _Handler:
    async def handler(conn: _Conn, request: _Request) -> None:
        conn.write(answer)

    return handler


async def _stream(response: UpstreamResponse) -> list[bytes]:
    pieces: list[bytes] = []
    while piece := await response.next_chunk():
        pieces.append(piece)
    return pieces


async def _lost(conn: _Conn) -> None:
    await asyncio.wait_for(conn.lost.wait(), 2)


# The body, whole or piece by piece.


def test_a_json_answer_arrives_whole_with_headers_matched_without_regard_to_case(
    make: _Factory,
) -> None:
    answer = _fixed(JSON, "Content-Type: application/json", "X-Request-Id: req-7")

    async def scenario() -> None:
        async with _serve(_answering(answer)) as server, _client(make) as client:
            response = await client.send(_request(server))
            assert response.status == 200
            assert response.headers.get("Content-Type") == "application/json"
            assert response.headers.get("content-type") == "application/json"
            assert response.headers.get("x-request-id") == "req-7"
            assert response.headers.get("Content-Length") == str(len(JSON))
            assert await response.read() == JSON

    _run(scenario())


def test_an_error_status_is_an_answer_not_a_failure(make: _Factory) -> None:
    error = b'{"error":{"type":"rate_limit_error"}}'
    answer = _fixed(error, "content-type: application/json", "retry-after: 7", status="429 Too")

    async def scenario() -> None:
        async with _serve(_answering(answer)) as server, _client(make) as client:
            response = await client.send(_request(server))
            assert response.status == 429
            assert response.headers.get("Retry-After") == "7"
            assert await response.read() == error

    _run(scenario())


def test_send_returns_at_the_headers_before_the_body_arrives(make: _Factory) -> None:
    async def scenario() -> None:
        body_may_go = asyncio.Event()

        async def handler(conn: _Conn, request: _Request) -> None:
            conn.write(_CHUNKED_HEAD)
            await body_may_go.wait()
            conn.write(_chunk(b"data: 1\n\n") + _LAST_CHUNK)

        async with _serve(handler) as server, _client(make) as client:
            response = await asyncio.wait_for(client.send(_request(server)), 2)
            assert response.status == 200
            assert response.headers.get("content-type") == "text/event-stream"
            body_may_go.set()
            assert b"".join(await _stream(response)) == b"data: 1\n\n"
            response.release()

    _run(scenario())


def test_a_chunked_stream_arrives_piece_by_piece(make: _Factory) -> None:
    events = [b'data: {"n":%d}\n\n' % n for n in range(5)]

    async def handler(conn: _Conn, request: _Request) -> None:
        conn.write(_CHUNKED_HEAD)
        for event in events:
            await asyncio.sleep(0.02)
            conn.write(_chunk(event))
        conn.write(_LAST_CHUNK)

    async def scenario() -> None:
        async with _serve(handler) as server, _client(make) as client:
            response = await client.send(_request(server))
            assert response.status == 200
            pieces = await _stream(response)
            assert b"".join(pieces) == b"".join(events)
            assert len(pieces) > 1
            assert await response.next_chunk() == b""
            response.release()
            # Read to its end and released, the connection serves the next request.
            again = await client.send(_request(server))
            assert b"".join(await _stream(again)) == b"".join(events)
            again.release()
            assert len(server.conns) == 1

    _run(scenario())


def test_an_answer_delimited_by_the_connection_closing(make: _Factory) -> None:
    body = b"no length, no chunks: the end of the connection ends the body"

    async def handler(conn: _Conn, request: _Request) -> None:
        conn.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n")
        conn.write(body[:10])
        await asyncio.sleep(0.02)
        conn.write(body[10:])
        conn.close()

    async def scenario() -> None:
        async with _serve(handler) as server, _client(make) as client:
            first = await client.send(_request(server))
            assert await first.read() == body
            second = await client.send(_request(server))
            assert await second.read() == body
            assert len(server.conns) == 2

    _run(scenario())


def test_a_large_stream_arrives_whole_and_in_order_to_a_slow_reader(make: _Factory) -> None:
    data = os.urandom(8 * 1024 * 1024)
    piece = 64 * 1024

    async def handler(conn: _Conn, request: _Request) -> None:
        if request.index == 0:
            conn.write(_CHUNKED_HEAD)
            for start in range(0, len(data), piece):
                conn.write(_chunk(data[start : start + piece]))
            conn.write(_LAST_CHUNK)
        else:
            conn.write(_fixed(JSON))

    async def scenario() -> None:
        async with _serve(handler) as server, _client(make) as client:
            response = await client.send(_request(server))
            # Let the transport's buffer fill, so it pauses reading and resumes later.
            await asyncio.sleep(0.05)
            received = bytearray()
            count = 0
            while chunk := await response.next_chunk():
                received += chunk
                count += 1
                if count % 16 == 0:
                    await asyncio.sleep(0.005)
            assert len(received) == len(data)
            assert received == data
            response.release()
            again = await client.send(_request(server))
            assert await again.read() == JSON
            assert len(server.conns) == 1

    _run(scenario())


def test_read_refuses_a_body_over_its_limit(make: _Factory) -> None:
    big = b"x" * 1000

    async def handler(conn: _Conn, request: _Request) -> None:
        if request.index == 0:
            conn.write(_fixed(big, "content-type: application/json"))
        elif request.index == 1:
            conn.write(_CHUNKED_HEAD + _chunk(big[:500]) + _chunk(big[500:]) + _LAST_CHUNK)
        else:
            conn.write(_fixed(JSON))

    async def scenario() -> None:
        async with _serve(handler) as server, _client(make) as client:
            declared = await client.send(_request(server))
            with pytest.raises(UpstreamUnreachable) as refused:
                await declared.read(limit=100)
            assert str(refused.value) == "the upstream sent a 1000-byte body (limit 100)"
            declared.close()
            chunked = await client.send(_request(server))
            with pytest.raises(UpstreamUnreachable) as refused:
                await chunked.read(limit=100)
            assert str(refused.value).startswith("the upstream sent a ")
            assert "(limit 100)" in str(refused.value)
            chunked.close()
            # The refusals leave the pool sound.
            after = await client.send(_request(server))
            assert await after.read() == JSON

    _run(scenario())


# The keep-alive pool.


def test_keep_alive_reuses_one_connection_and_close_drops_it(make: _Factory) -> None:
    async def handler(conn: _Conn, request: _Request) -> None:
        if request.index == 3:
            # Part of the body, the rest held back: what remains on this connection
            # belongs to this answer, so it must never carry another request.
            conn.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n" + b"x" * 10)
        else:
            conn.write(_fixed(b'{"n":%d}' % request.index, "content-type: application/json"))

    async def scenario() -> None:
        async with _serve(handler) as server, _client(make) as client:
            for n in range(3):
                response = await client.send(_request(server))
                assert await response.read() == b'{"n":%d}' % n
            assert len(server.conns) == 1
            assert len(server.requests) == 3
            # Closed with its body unread, the connection is dropped, not pooled.
            unread = await client.send(_request(server))
            assert unread.status == 200
            unread.close()
            await _lost(server.conns[0])
            response = await client.send(_request(server))
            assert await response.read() == b'{"n":4}'
            assert len(server.conns) == 2
            assert [conn.received.count(b"POST ") for conn in server.conns] == [4, 1]

    _run(scenario())


def test_connection_close_with_a_length_is_not_reused(make: _Factory) -> None:
    async def handler(conn: _Conn, request: _Request) -> None:
        # Says it closes but leaves the socket open: the client must not reuse it.
        conn.write(_fixed(b'{"n":%d}' % request.index, "connection: close"))

    async def scenario() -> None:
        async with _serve(handler) as server, _client(make) as client:
            first = await client.send(_request(server))
            assert await first.read() == b'{"n":0}'
            second = await client.send(_request(server))
            assert await second.read() == b'{"n":1}'
            assert len(server.conns) == 2
            assert [conn.received.count(b"POST ") for conn in server.conns] == [1, 1]

    _run(scenario())


def test_a_pooled_connection_the_server_closed_is_not_reused(make: _Factory) -> None:
    async def scenario() -> None:
        async with _serve(_answering(_fixed(JSON))) as server, _client(make) as client:
            first = await client.send(_request(server))
            assert await first.read() == JSON
            server.conns[0].close()
            await _lost(server.conns[0])
            await asyncio.sleep(0.05)
            second = await client.send(_request(server))
            assert second.status == 200
            assert await second.read() == JSON
            assert len(server.conns) == 2
            assert server.conns[0].received.count(b"POST ") == 1

    _run(scenario())


def test_concurrent_requests_each_get_their_own_answer(make: _Factory) -> None:
    async def handler(conn: _Conn, request: _Request) -> None:
        await asyncio.sleep(0.01)
        (request_id,) = request.header("x-request-id")
        conn.write(_fixed(request_id.encode(), f"x-request-id: {request_id}"))

    async def one(client: _Transport, server: _Server, n: int) -> tuple[str | None, bytes]:
        headers = {"content-type": "application/json", "x-request-id": f"id-{n}"}
        response = await client.send(_request(server, headers=headers))
        return response.headers.get("x-request-id"), await response.read()

    async def scenario() -> None:
        async with _serve(handler) as server, _client(make) as client:
            answers = await asyncio.gather(*(one(client, server, n) for n in range(20)))
            assert answers == [(f"id-{n}", b"id-%d" % n) for n in range(20)]
            assert len(server.requests) == 20
            assert 1 <= len(server.conns) <= 20

    _run(scenario())


# What goes on the wire.


def test_the_request_goes_out_as_given(make: _Factory) -> None:
    path = "/v1/models/x:generateContent?alt=sse"
    headers = {
        "content-type": "application/json",
        "authorization": "Bearer sk-test-123",
        "X-Mixed-Case": "Value With Spaces",
    }
    # Large enough to take several writes, and with bytes a text codec would mangle.
    body = b'{"text":"' + "h\u00e9llo \u2603 ".encode() * 20000 + b'\r\n\x00\xff"}'

    async def scenario() -> None:
        async with _serve(_answering(_fixed(JSON))) as server, _client(make) as client:
            response = await client.send(_request(server, path, headers, body))
            assert await response.read() == JSON
            (seen,) = server.requests
            assert seen.line == f"POST {path} HTTP/1.1".encode()
            assert seen.header("host") == [f"127.0.0.1:{server.port}"]
            assert seen.header("content-type") == ["application/json"]
            assert seen.header("authorization") == ["Bearer sk-test-123"]
            assert seen.header("x-mixed-case") == ["Value With Spaces"]
            assert seen.header("content-length") == [str(len(body))]
            assert seen.header("transfer-encoding") == []
            assert seen.header("accept-encoding") == ["identity"]
            assert seen.body == body

    _run(scenario())


@pytest.mark.parametrize("injected", ["a\r\nx-injected: yes", "a\nx-injected: yes"])
def test_a_header_value_with_a_line_break_is_refused_before_sending(
    make: _Factory, injected: str
) -> None:
    async def scenario() -> None:
        async with _serve(_answering(_fixed(JSON))) as server, _client(make) as client:
            headers = {"content-type": "application/json", "x-note": injected}
            with pytest.raises((ValueError, UpstreamUnreachable)):
                await client.send(_request(server, headers=headers))
            await asyncio.sleep(0.05)
            assert server.requests == []
            assert [bytes(conn.received) for conn in server.conns if conn.received] == []
            # The transport still serves well-formed requests.
            response = await client.send(_request(server))
            assert await response.read() == JSON
            assert b"x-injected" not in b"".join(conn.received for conn in server.conns)

    _run(scenario())


# Failures, in the words the gateway relays.


def test_a_refused_connection_is_unreachable_and_never_reached(make: _Factory) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def scenario() -> None:
        async with _client(make) as client:
            request = UpstreamRequest(f"http://127.0.0.1:{port}/v1/chat/completions", {}, b"{}")
            with pytest.raises(UpstreamUnreachable) as failure:
                await client.send(request)
            assert failure.value.reached is False
            assert f"cannot connect to 127.0.0.1:{port}" in str(failure.value)

    _run(scenario())


def test_no_headers_in_time_is_a_timeout_and_the_connection_is_dropped(make: _Factory) -> None:
    async def handler(conn: _Conn, request: _Request) -> None:
        if request.index > 0:
            conn.write(_fixed(JSON))

    async def scenario() -> None:
        timeouts = TimeoutSettings(first_byte_s=0.2)
        async with _serve(handler) as server, _client(make, timeouts) as client:
            started = time.monotonic()
            with pytest.raises(UpstreamTimeout) as failure:
                await client.send(_request(server))
            waited = time.monotonic() - started
            assert str(failure.value).startswith("no response within 0.2s")
            assert 0.15 <= waited < 2
            # A late answer must not be read as the next request's: that connection goes.
            await _lost(server.conns[0])
            response = await client.send(_request(server))
            assert await response.read() == JSON
            assert len(server.conns) == 2

    _run(scenario())


def test_a_stream_gone_idle_is_a_timeout(make: _Factory) -> None:
    async def handler(conn: _Conn, request: _Request) -> None:
        conn.write(_CHUNKED_HEAD)
        await asyncio.sleep(0.02)
        conn.write(_chunk(b"data: first\n\n"))

    async def scenario() -> None:
        # first_byte_s apart from idle_s, so a transport that keeps the wrong one shows.
        timeouts = TimeoutSettings(first_byte_s=1, idle_s=0.2)
        async with _serve(handler) as server, _client(make, timeouts) as client:
            response = await client.send(_request(server))
            assert await response.next_chunk() == b"data: first\n\n"
            started = time.monotonic()
            with pytest.raises(UpstreamTimeout) as failure:
                await _stream(response)
            waited = time.monotonic() - started
            response.close()
            assert str(failure.value) == "the stream was idle for 0.2s"
            assert 0.15 <= waited < 0.8

    _run(scenario())


def test_idle_s_applies_from_the_headers_even_when_data_came_with_them(
    make: _Factory,
) -> None:
    # The headers and the first chunk come in one read, then nothing: the idle timeout,
    # not the first-byte one, ends the wait.
    async def handler(conn: _Conn, request: _Request) -> None:
        conn.write(_CHUNKED_HEAD + _chunk(b"data: first\n\n"))

    async def scenario() -> None:
        timeouts = TimeoutSettings(first_byte_s=1, idle_s=0.2)
        async with _serve(handler) as server, _client(make, timeouts) as client:
            response = await client.send(_request(server))
            started = time.monotonic()
            with pytest.raises(UpstreamTimeout) as failure:
                await _stream(response)
            waited = time.monotonic() - started
            response.close()
            assert str(failure.value) == "the stream was idle for 0.2s"
            assert waited < 0.8

    _run(scenario())


def test_a_body_gone_idle_is_a_timeout(make: _Factory) -> None:
    async def handler(conn: _Conn, request: _Request) -> None:
        conn.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n")
        await asyncio.sleep(0.02)
        conn.write(b"x" * 10)

    async def scenario() -> None:
        timeouts = TimeoutSettings(first_byte_s=1, idle_s=0.2)
        async with _serve(handler) as server, _client(make, timeouts) as client:
            response = await client.send(_request(server))
            started = time.monotonic()
            with pytest.raises(UpstreamTimeout) as failure:
                await response.read()
            waited = time.monotonic() - started
            assert str(failure.value) == "no data for 0.2s while reading the body"
            assert 0.15 <= waited < 0.8
            await _lost(server.conns[0])

    _run(scenario())


def test_a_stream_cut_off_mid_way_is_unreachable(make: _Factory) -> None:
    async def handler(conn: _Conn, request: _Request) -> None:
        conn.write(_CHUNKED_HEAD + _chunk(b"data: first\n\n"))
        await asyncio.sleep(0.02)
        conn.close()

    async def scenario() -> None:
        async with _serve(handler) as server, _client(make) as client:
            response = await client.send(_request(server))
            assert await response.next_chunk() == b"data: first\n\n"
            with pytest.raises(UpstreamUnreachable) as failure:
                await _stream(response)
            response.close()
            assert str(failure.value).startswith("the stream was cut off: ")
            assert failure.value.reached is True

    _run(scenario())


def test_a_body_cut_off_mid_way_is_unreachable(make: _Factory) -> None:
    async def handler(conn: _Conn, request: _Request) -> None:
        conn.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n" + b"x" * 10)
        await asyncio.sleep(0.02)
        conn.close()

    async def scenario() -> None:
        async with _serve(handler) as server, _client(make) as client:
            response = await client.send(_request(server))
            with pytest.raises(UpstreamUnreachable) as failure:
                await response.read()
            assert str(failure.value).startswith("connection lost while reading the body: ")
            assert failure.value.reached is True

    _run(scenario())


@pytest.mark.parametrize("sent", [b"", b"HTTP/1.1 200 OK\r\ncontent-"], ids=["nothing", "part"])
def test_a_connection_closed_before_the_headers_is_unreachable(make: _Factory, sent: bytes) -> None:
    async def handler(conn: _Conn, request: _Request) -> None:
        conn.write(sent)
        conn.close()

    async def scenario() -> None:
        async with _serve(handler) as server, _client(make) as client:
            with pytest.raises(UpstreamUnreachable) as failure:
                await client.send(_request(server))
            assert failure.value.reached is True
            # A request that may have been acted on is not sent again.
            assert len(server.requests) == 1

    _run(scenario())


def test_cancelling_a_send_drops_its_connection(make: _Factory) -> None:
    async def handler(conn: _Conn, request: _Request) -> None:
        if request.index > 0:
            conn.write(_fixed(JSON))

    async def scenario() -> None:
        async with _serve(handler) as server, _client(make) as client:
            waiting = asyncio.create_task(client.send(_request(server)))
            await asyncio.sleep(0.1)
            assert len(server.requests) == 1
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            await _lost(server.conns[0])
            response = await client.send(_request(server))
            assert await response.read() == JSON
            assert len(server.conns) == 2

    _run(scenario())
