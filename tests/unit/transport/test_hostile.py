"""The upstream client against a hostile upstream (`tests.hostile`).

For each answer an upstream could get wrong (lengths that lie, chunks that do not parse,
bytes after the answer, floods of headers or of interim answers, a 101, an early answer, a
reset in the middle of the body, a slow drip) the client either reads the answer whole or
fails with `UpstreamUnreachable` or `UpstreamTimeout` in words that say what the upstream
did. Whatever happened, the next request on the same client gets its own answer, on a
connection the hostile answer did not spoil, and the upstream sees each request once.
"""

from __future__ import annotations

import asyncio
import os
import time
import tracemalloc
from collections.abc import Coroutine, Iterator
from typing import Any

import pytest
import uvloop

from rungway.adapters.base import UpstreamRequest
from rungway.config import TimeoutSettings
from rungway.engine.transport import UpstreamTimeout, UpstreamUnreachable
from rungway.transport.connection import HEAD_LIMIT
from rungway.transport.http11 import Http11Transport
from tests.hostile import (
    CHUNKED_HEAD,
    LAST_CHUNK,
    HostileServer,
    Peer,
    Received,
    Script,
    answer,
    chunk,
    pieces,
    serve,
)

GOOD = b'{"id":"chatcmpl-good","usage":{"prompt_tokens":3,"completion_tokens":2}}'
JSON_HEAD = CHUNKED_HEAD % b"application/json"
SSE_HEAD = CHUNKED_HEAD % b"text/event-stream"


def _run(scenario: Coroutine[Any, Any, None], limit_s: float = 10) -> None:
    # A client that hangs fails its test in seconds rather than at the suite's timeout.
    uvloop.run(asyncio.wait_for(scenario, limit_s))


def _first_then_good(first: Script) -> Script:
    """The hostile `first` answer to the first request, a good answer to every other."""

    async def script(peer: Peer, request: Received) -> None:
        if request.index == 0:
            await first(peer, request)
        else:
            peer.write(answer(GOOD, "content-type: application/json"))

    return script


def _writes(*data: bytes, then: str = "", pause_s: float = 0.0) -> Script:
    async def script(peer: Peer, request: Received) -> None:
        for piece in data:
            await peer.send(pieces(piece))
            if pause_s:
                await asyncio.sleep(pause_s)
        if then == "close":
            peer.close()
        elif then == "reset":
            await asyncio.sleep(0.05)
            peer.reset()

    return script


def _post(server: HostileServer, body: bytes = b'{"model":"m"}') -> UpstreamRequest:
    return UpstreamRequest(
        f"{server.url}/v1/chat/completions", {"content-type": "application/json"}, body
    )


async def _send_and_read(client: Http11Transport, server: HostileServer) -> bytes:
    response = await client.send(_post(server))
    return await response.read()


async def _then_good(client: Http11Transport, server: HostileServer) -> None:
    """The next request gets its own answer, and no request reached the upstream twice."""
    before = len(server.requests)
    response = await client.send(_post(server))
    assert response.status == 200
    assert await response.read() == GOOD
    assert len(server.requests) == before + 1


# Answers the client reads whole, whatever is odd about them.

READABLE: dict[str, tuple[bytes, bytes]] = {
    "chunk extensions": (
        JSON_HEAD + b"4;name=value;x\r\nGOOD\r\n0;end\r\n\r\n",
        b"GOOD",
    ),
    "trailers": (
        JSON_HEAD + chunk(b"GOOD") + b"0\r\nx-trailer: 1\r\nx-other: 2\r\n\r\n",
        b"GOOD",
    ),
    "interim answers first": (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n"
        + answer(GOOD),
        GOOD,
    ),
    "empty body": (answer(b""), b""),
    "one chunk per byte": (
        JSON_HEAD + b"".join(chunk(bytes([b])) for b in GOOD) + LAST_CHUNK,
        GOOD,
    ),
}


@pytest.mark.parametrize("case", list(READABLE))
def test_an_odd_but_valid_answer_is_read_whole(case: str) -> None:
    sent, body = READABLE[case]

    async def scenario() -> None:
        async with serve(_first_then_good(_writes(sent))) as server, _client() as client:
            response = await client.send(_post(server))
            assert response.status == 200
            assert await response.read() == body
            assert "x-trailer" not in response.headers
            await _then_good(client, server)
            # A valid answer leaves its connection fit for the next request.
            assert len(server.peers) == 1

    _run(scenario())


# Answers the client refuses, and the words it refuses them in.

INVALID = "the upstream's answer is not valid HTTP"
REFUSED: dict[str, tuple[bytes, str]] = {
    "invalid length": (b"HTTP/1.1 200 OK\r\ncontent-length: 12x\r\n\r\nhello", INVALID),
    "negative length": (b"HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\nhello", INVALID),
    "duplicated length": (
        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 5\r\n\r\nhello",
        f"{INVALID} (Duplicate Content-Length)",
    ),
    "conflicting lengths": (
        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 7\r\n\r\nhello",
        f"{INVALID} (Duplicate Content-Length)",
    ),
    "length and chunks": (
        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n"
        + chunk(b"hello")
        + LAST_CHUNK,
        INVALID,
    ),
    "bad chunk size": (JSON_HEAD + b"zz\r\nhello\r\n0\r\n\r\n", INVALID),
    "chunk size overflow": (JSON_HEAD + b"f" * 20 + b"\r\nhello\r\n", INVALID),
    "chunk without its line end": (JSON_HEAD + b"5\r\nhelloXX5\r\nhello\r\n", INVALID),
    "obsolete line folding": (
        b"HTTP/1.1 200 OK\r\nx-folded: a\r\n b\r\ncontent-length: 5\r\n\r\nhello",
        INVALID,
    ),
    "not HTTP": (b"SSH-2.0-OpenSSH_9.6\r\n", INVALID),
    "switching protocols": (
        b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n"
        b"\x81\x05hello",
        "the upstream switched protocols (101) instead of answering",
    ),
    "switching protocols bare": (
        b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
        "the upstream switched protocols (101) instead of answering",
    ),
    "too many header fields": (
        b"HTTP/1.1 200 OK\r\n" + b"x-h: 1\r\n" * 101 + b"content-length: 0\r\n\r\n",
        "the upstream's answer has more than 100 header fields",
    ),
    "interim answer flood": (
        b"HTTP/1.1 100 Continue\r\n\r\n" * 40000 + answer(GOOD),
        f"the upstream's answer has a head of over {HEAD_LIMIT // 1024} KiB (after ",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_broken_answer_is_refused_in_words_and_spoils_nothing(case: str) -> None:
    sent, words = REFUSED[case]

    async def scenario() -> None:
        async with serve(_first_then_good(_writes(sent))) as server, _client() as client:
            with pytest.raises(UpstreamUnreachable) as refused:
                await _send_and_read(client, server)
            assert words in str(refused.value)
            assert refused.value.reached is True
            await asyncio.wait_for(server.peers[0].lost.wait(), 2)
            await _then_good(client, server)
            assert len(server.peers) == 2

    _run(scenario())


# Lengths that lie, and what follows an answer.


@pytest.mark.parametrize(
    "after",
    [b"HTTP/1.1 200 OK\r\n", b"XYZ", answer(b'{"other":1}')],
    ids=["part of a head", "garbage", "a whole second answer"],
)
def test_bytes_after_the_answer_are_never_read_as_the_next_one(after: bytes) -> None:
    # A length shorter than the body leaves the rest after the answer, in the same read.
    async def scenario() -> None:
        first = _writes(answer(GOOD) + after)
        async with serve(_first_then_good(first)) as server, _client() as client:
            response = await client.send(_post(server))
            assert await response.read() == GOOD
            for _ in range(4):
                await _then_good(client, server)
            # The spoilt connection carried nothing more; the good ones share one.
            assert server.peers[0].requests == 1
            assert len(server.peers) == 2

    _run(scenario())


def test_a_length_longer_than_the_body_is_a_lost_connection_at_the_close() -> None:
    async def scenario() -> None:
        first = _writes(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nhello", then="close")
        async with serve(_first_then_good(first)) as server, _client() as client:
            response = await client.send(_post(server))
            with pytest.raises(UpstreamUnreachable) as lost:
                await response.read()
            assert str(lost.value) == (
                "connection lost while reading the body: the upstream closed the connection"
            )
            await _then_good(client, server)

    _run(scenario())


@pytest.mark.parametrize("framing", ["length", "chunks", "close"])
def test_a_reset_in_the_middle_of_the_body_is_a_lost_connection(framing: str) -> None:
    head = {
        "length": b"HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n",
        "chunks": JSON_HEAD + b"186a0\r\n",
        # Delimited by the close: only a clean close ends it, a reset cuts it off.
        "close": b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n",
    }[framing]

    async def scenario() -> None:
        first = _writes(head + b"x" * 5000, then="reset")
        async with serve(_first_then_good(first)) as server, _client() as client:
            response = await client.send(_post(server))
            with pytest.raises(UpstreamUnreachable) as lost:
                await response.read()
            assert str(lost.value).startswith("connection lost while reading the body: ")
            assert "reset" in str(lost.value)
            await _then_good(client, server)

    _run(scenario())


def test_an_early_answer_before_the_request_body_is_read_is_delivered() -> None:
    # The upstream answers as soon as it has the head, never reads the body, and closes.
    async def scenario() -> None:
        async def early(peer: Peer, request: Received) -> None:
            if request.index == 0:
                peer.write(answer(b'{"error":"no"}', "connection: close", status="401 No"))
                peer.close()
            else:
                peer.write(answer(GOOD))

        async with serve(early, at_head=True) as server, _client() as client:
            response = await client.send(
                _post(server, b'{"model":"m","pad":"' + b"x" * 4000 + b'"}')
            )
            assert response.status == 401
            assert await response.read() == b'{"error":"no"}'
            await _then_good(client, server)
            assert len(server.peers) == 2

    _run(scenario())


# Slow upstreams.


def test_a_slow_drip_within_the_idle_timeout_is_read_whole() -> None:
    sent = answer(GOOD)

    async def drip(peer: Peer, request: Received) -> None:
        for at in range(len(sent)):
            peer.write(sent[at : at + 1])
            await asyncio.sleep(0.002)

    async def scenario() -> None:
        timeouts = TimeoutSettings(first_byte_s=2, idle_s=0.5)
        async with serve(drip) as server, _client(timeouts) as client:
            response = await client.send(_post(server))
            assert await response.read() == GOOD

    _run(scenario())


def test_a_drip_slower_than_the_idle_timeout_times_out() -> None:
    async def scenario() -> None:
        first = _writes(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nab", b"c", pause_s=0.4)
        timeouts = TimeoutSettings(first_byte_s=2, idle_s=0.2)
        async with serve(_first_then_good(first)) as server, _client(timeouts) as client:
            response = await client.send(_post(server))
            with pytest.raises(UpstreamTimeout) as late:
                await response.read()
            assert str(late.value) == "no data for 0.2s while reading the body"
            await _then_good(client, server)

    _run(scenario())


# Bodies of every size, whole and as a stream.

SIZES = [0, 1, 100 * 1024, 300 * 1024, 600 * 1024, 5 * 1024 * 1024]


def _framed(data: bytes, framing: str) -> list[bytes]:
    if framing == "length":
        return [b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(data), *pieces(data)]
    return [JSON_HEAD, *(chunk(piece) for piece in pieces(data, 100_000)), LAST_CHUNK]


def _sending(data: bytes, framing: str) -> Script:
    async def script(peer: Peer, request: Received) -> None:
        await peer.send(_framed(data, framing))

    return script


@pytest.mark.parametrize("framing", ["length", "chunks"])
@pytest.mark.parametrize("size", SIZES)
def test_a_body_of_any_size_is_read_whole_without_waiting_for_the_idle_timeout(
    size: int, framing: str
) -> None:
    data = os.urandom(size)

    async def scenario() -> None:
        # An idle timeout longer than the test's own: a read that stalls fails the test.
        timeouts = TimeoutSettings(idle_s=30)
        script = _first_then_good(_sending(data, framing))
        async with serve(script) as server, _client(timeouts) as client:
            response = await client.send(_post(server))
            assert await response.read() == data
            await _then_good(client, server)
            assert len(server.peers) == 1

    _run(scenario(), limit_s=5)


@pytest.mark.parametrize("size", SIZES)
def test_a_stream_of_any_size_arrives_whole(size: int) -> None:
    data = os.urandom(size)

    async def scenario() -> None:
        async with serve(_first_then_good(_sending(data, "chunks"))) as server, _client() as client:
            response = await client.send(_post(server))
            received = bytearray()
            while piece := await response.next_chunk():
                received += piece
            response.release()
            assert received == data
            await _then_good(client, server)

    _run(scenario(), limit_s=5)


@pytest.mark.parametrize("framing", ["length", "chunks"])
def test_a_50_mb_body_is_read_whole_and_as_a_stream(framing: str) -> None:
    data = os.urandom(50 * 1024 * 1024)

    async def scenario() -> None:
        async with serve(_sending(data, framing)) as server, _client() as client:
            whole = await client.send(_post(server))
            assert await whole.read() == data
            streamed = await client.send(_post(server))
            received = bytearray()
            while piece := await streamed.next_chunk():
                received += piece
            streamed.release()
            assert received == data

    _run(scenario(), limit_s=60)


def test_a_body_over_the_limit_is_refused_as_soon_as_it_passes_the_limit() -> None:
    # Chunked, so no length warns of it, and never ended: only the limit stops the read.
    async def endless(peer: Peer, request: Received) -> None:
        if request.index > 0:
            peer.write(answer(GOOD))
            return
        await peer.send([JSON_HEAD, *(chunk(b"x" * 65536) for _ in range(64))])
        await asyncio.sleep(30)

    async def scenario() -> None:
        async with serve(endless) as server, _client(TimeoutSettings(idle_s=30)) as client:
            response = await client.send(_post(server))
            started = time.monotonic()
            with pytest.raises(UpstreamUnreachable) as refused:
                await response.read(limit=1024 * 1024)
            assert time.monotonic() - started < 2
            assert str(refused.value).startswith("the upstream sent a body over its limit")
            assert str(refused.value).endswith(f"(limit {1024 * 1024})")
            await _then_good(client, server)

    _run(scenario())


# Memory stays bounded whatever the upstream sends.


def _header_flood(total: int, line: bytes) -> Iterator[bytes]:
    yield b"HTTP/1.1 200 OK\r\n"
    batch = line * (64 * 1024 // len(line))
    for _ in range(total // len(batch)):
        yield batch
    yield b"content-length: 2\r\n\r\nok"


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (b"x-flood: " + b"y" * 100 + b"\r\n", "the upstream's answer has more than 100 header"),
        (b"x-flood: " + b"y" * 1000 + b"\r\n", "the upstream's answer has a head of over 64 KiB"),
        (b"x-long: " + b"y" * (64 * 1024 - 10) + b"\r\n", "the upstream's answer has a head of"),
    ],
    ids=["many lines", "long lines", "one line over the limit"],
)
def test_a_header_flood_is_refused_within_a_bounded_memory(line: bytes, words: str) -> None:
    flood = 16 * 1024 * 1024
    peaks: list[int] = []

    async def flooding(peer: Peer, request: Received) -> None:
        if request.index > 0:
            peer.write(answer(GOOD))
            return
        await peer.send(_header_flood(flood, line))

    async def scenario() -> None:
        async with serve(flooding) as server, _client() as client:
            tracemalloc.start()
            try:
                with pytest.raises(UpstreamUnreachable) as refused:
                    await client.send(_post(server))
                peaks.append(tracemalloc.get_traced_memory()[1])
            finally:
                tracemalloc.stop()
            assert str(refused.value).startswith(words)
            await _then_good(client, server)

    _run(scenario())
    # The head limit and one socket read (256 KiB) of what follows, with room to spare.
    assert peaks[0] < 2 * 1024 * 1024


def _client(timeouts: TimeoutSettings | None = None) -> _Started:
    return _Started(timeouts or TimeoutSettings())


class _Started:
    """A started `Http11Transport`, closed at the block's end."""

    def __init__(self, timeouts: TimeoutSettings) -> None:
        self.transport = Http11Transport(timeouts)

    async def __aenter__(self) -> Http11Transport:
        await self.transport.start()
        return self.transport

    async def __aexit__(self, *exc: object) -> None:
        await self.transport.close()
