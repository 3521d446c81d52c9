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

import pytest

from rungway.config import TimeoutSettings
from rungway.engine.transport import UpstreamTimeout, UpstreamUnreachable
from rungway.transport.connection import HEAD_LIMIT
from tests.hostile import LAST_CHUNK, Peer, Received, answer, chunk, serve
from tests.unit.transport.hostile_client import (
    GOOD,
    JSON_HEAD,
    first_then_good,
    post,
    run,
    send_and_read,
    started,
    then_good,
    writes,
)

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
        async with serve(first_then_good(writes(sent))) as server, started() as client:
            response = await client.send(post(server))
            assert response.status == 200
            assert await response.read() == body
            assert "x-trailer" not in response.headers
            await then_good(client, server)
            # A valid answer leaves its connection fit for the next request.
            assert len(server.peers) == 1

    run(scenario())


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
        async with serve(first_then_good(writes(sent))) as server, started() as client:
            with pytest.raises(UpstreamUnreachable) as refused:
                await send_and_read(client, server)
            assert words in str(refused.value)
            assert refused.value.reached is True
            await asyncio.wait_for(server.peers[0].lost.wait(), 2)
            await then_good(client, server)
            assert len(server.peers) == 2

    run(scenario())


# Lengths that lie, and what follows an answer.


@pytest.mark.parametrize(
    "after",
    [b"HTTP/1.1 200 OK\r\n", b"XYZ", answer(b'{"other":1}')],
    ids=["part of a head", "garbage", "a whole second answer"],
)
def test_bytes_after_the_answer_are_never_read_as_the_next_one(after: bytes) -> None:
    # A length shorter than the body leaves the rest after the answer, in the same read.
    async def scenario() -> None:
        first = writes(answer(GOOD) + after)
        async with serve(first_then_good(first)) as server, started() as client:
            response = await client.send(post(server))
            assert await response.read() == GOOD
            for _ in range(4):
                await then_good(client, server)
            # The spoilt connection carried nothing more; the good ones share one.
            assert server.peers[0].requests == 1
            assert len(server.peers) == 2

    run(scenario())


def test_a_length_longer_than_the_body_is_a_lost_connection_at_the_close() -> None:
    async def scenario() -> None:
        first = writes(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nhello", then="close")
        async with serve(first_then_good(first)) as server, started() as client:
            response = await client.send(post(server))
            with pytest.raises(UpstreamUnreachable) as lost:
                await response.read()
            assert str(lost.value) == (
                "connection lost while reading the body: the upstream closed the connection"
            )
            await then_good(client, server)

    run(scenario())


@pytest.mark.parametrize("framing", ["length", "chunks", "close"])
def test_a_reset_in_the_middle_of_the_body_is_a_lost_connection(framing: str) -> None:
    head = {
        "length": b"HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n",
        "chunks": JSON_HEAD + b"186a0\r\n",
        # Delimited by the close: only a clean close ends it, a reset cuts it off.
        "close": b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n",
    }[framing]

    async def scenario() -> None:
        first = writes(head + b"x" * 5000, then="reset")
        async with serve(first_then_good(first)) as server, started() as client:
            response = await client.send(post(server))
            with pytest.raises(UpstreamUnreachable) as lost:
                await response.read()
            assert str(lost.value).startswith("connection lost while reading the body: ")
            assert "reset" in str(lost.value)
            await then_good(client, server)

    run(scenario())


def test_an_early_answer_before_the_request_body_is_read_is_delivered() -> None:
    # The upstream answers as soon as it has the head, never reads the body, and closes.
    async def scenario() -> None:
        async def early(peer: Peer, request: Received) -> None:
            if request.index == 0:
                peer.write(answer(b'{"error":"no"}', "connection: close", status="401 No"))
                peer.close()
            else:
                peer.write(answer(GOOD))

        async with serve(early, at_head=True) as server, started() as client:
            response = await client.send(
                post(server, b'{"model":"m","pad":"' + b"x" * 4000 + b'"}')
            )
            assert response.status == 401
            assert await response.read() == b'{"error":"no"}'
            await then_good(client, server)
            assert len(server.peers) == 2

    run(scenario())


# Slow upstreams.


def test_a_slow_drip_within_the_idle_timeout_is_read_whole() -> None:
    sent = answer(GOOD)

    async def drip(peer: Peer, request: Received) -> None:
        for at in range(len(sent)):
            peer.write(sent[at : at + 1])
            await asyncio.sleep(0.002)

    async def scenario() -> None:
        timeouts = TimeoutSettings(first_byte_s=2, idle_s=0.5)
        async with serve(drip) as server, started(timeouts) as client:
            response = await client.send(post(server))
            assert await response.read() == GOOD

    run(scenario())


def test_a_drip_slower_than_the_idle_timeout_times_out() -> None:
    async def scenario() -> None:
        first = writes(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nab", b"c", pause_s=0.4)
        timeouts = TimeoutSettings(first_byte_s=2, idle_s=0.2)
        async with serve(first_then_good(first)) as server, started(timeouts) as client:
            response = await client.send(post(server))
            with pytest.raises(UpstreamTimeout) as late:
                await response.read()
            assert str(late.value) == "no data for 0.2s while reading the body"
            await then_good(client, server)

    run(scenario())
