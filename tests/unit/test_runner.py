"""The server protocol writes a reply's head and body in one call, and a stream's head at once."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from rungway.protocol.asgi import Receive, Scope, Send
from rungway.runner import BackgroundServer, JoinedHeadProtocol, uvicorn_config
from rungway.runner.joined_head import _JoinedHead

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n"
CHUNKED = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)


class Recording(asyncio.Transport):
    """A transport that records each call that would reach the socket."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, bytes]] = []
        self.closed = False

    def write(self, data: Any) -> None:
        self.calls.append(("write", bytes(data)))

    def writelines(self, list_of_data: Any) -> None:
        self.calls.append(("writelines", b"".join(list_of_data)))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def test_a_head_with_a_length_goes_out_with_the_body() -> None:
    inner = Recording()
    joined = _JoinedHead(inner)
    joined.write(HEAD)
    assert inner.calls == []
    joined.write(b"{}")
    joined.write(b"")
    assert inner.calls == [("writelines", HEAD + b"{}"), ("write", b"")]


def test_a_chunked_head_goes_out_at_once() -> None:
    inner = Recording()
    joined = _JoinedHead(inner)
    joined.write(CHUNKED)
    joined.write(b"5\r\nhello\r\n")
    assert inner.calls == [("write", CHUNKED), ("write", b"5\r\nhello\r\n")]


def test_an_interim_head_passes_and_the_final_head_is_held() -> None:
    inner = Recording()
    joined = _JoinedHead(inner)
    joined.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    joined.write(HEAD)
    joined.write(b"{}")
    assert inner.calls == [
        ("write", b"HTTP/1.1 100 Continue\r\n\r\n"),
        ("writelines", HEAD + b"{}"),
    ]


def test_a_body_that_looks_like_a_head_is_never_held() -> None:
    inner = Recording()
    joined = _JoinedHead(inner)
    joined.write(CHUNKED)
    joined.write(HEAD)  # text that happens to read as a head, after the real one
    assert inner.calls == [("write", CHUNKED), ("write", HEAD)]


def test_closing_writes_a_held_head_first() -> None:
    inner = Recording()
    joined = _JoinedHead(inner)
    joined.write(HEAD)
    joined.close()
    assert inner.calls == [("write", HEAD)]
    assert inner.closed
    assert joined.is_closing()


async def _app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    await receive()
    if scope["path"] == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"a", "more_body": True})
        await asyncio.sleep(0.3)
        await send({"type": "http.response.body", "body": b"b"})
        return
    body = b'{"ok":true}'
    headers = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
def server() -> Any:
    config = uvicorn_config(_app)
    assert config.http is JoinedHeadProtocol
    with BackgroundServer(config, "joined-head") as running:
        yield running


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def test_a_reply_arrives_whole_in_one_read(server: BackgroundServer) -> None:
    with socket.create_connection(_address(server.url), timeout=5) as client:
        for _ in range(3):  # and again on the kept-alive connection
            client.sendall(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            data = client.recv(65536)
            # One write on loopback is one read: the head and the body together.
            assert data.startswith(b"HTTP/1.1 200 OK\r\n")
            assert data.endswith(b'\r\n\r\n{"ok":true}')


def test_a_stream_head_arrives_before_its_slow_body(server: BackgroundServer) -> None:
    with socket.create_connection(_address(server.url), timeout=5) as client:
        client.sendall(b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\n")
        first = b""
        while b"\r\n\r\n" not in first:
            first += client.recv(65536)
        assert b"transfer-encoding: chunked" in first
        assert not first.endswith(b"b\r\n0\r\n\r\n")  # the last part waits 0.3 s


def test_a_head_request_gets_its_head_at_once(server: BackgroundServer) -> None:
    # uvicorn writes no body for HEAD: a held head would never leave.
    with socket.create_connection(_address(server.url), timeout=5) as client:
        for _ in range(2):
            client.sendall(b"HEAD / HTTP/1.1\r\nhost: x\r\n\r\n")
            data = b""
            while not data.endswith(b"\r\n\r\n"):
                data += client.recv(65536)
            assert data.startswith(b"HTTP/1.1 200 OK\r\n")
            assert b"content-length: 11\r\n" in data
