"""The request path's pipelined Redis channel against the real Redis: replies reach their
callers in order under concurrency, a lost script is loaded again, and a silent or dropped
connection fails its callers as redis-py would and is opened again by the next call."""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest
from redis import exceptions as rx

from rungway.cluster.channel import ChannelScript, RespChannel
from tests.proxy import CuttableProxy

ECHO = "return {KEYS[1], ARGV[1]}"


def test_concurrent_calls_each_get_their_own_reply(redis_prefix: str) -> None:
    async def run() -> list[object]:
        channel = RespChannel("127.0.0.1", 6379)
        script = ChannelScript(channel, ECHO)
        try:
            replies: list[object] = await asyncio.gather(
                *(script([f"{redis_prefix}:k{i}"], [i]) for i in range(500))
            )
            return replies
        finally:
            channel.close()

    replies = asyncio.run(run())
    assert replies == [[f"{redis_prefix}:k{i}".encode(), str(i).encode()] for i in range(500)]


def test_a_script_redis_lost_is_loaded_again_and_errors_raise_as_redis_py_would(
    redis_prefix: str,
) -> None:
    source = f"return '{redis_prefix}'"  # a script no other test has loaded

    async def run() -> None:
        channel = RespChannel("127.0.0.1", 6379)
        try:
            assert await ChannelScript(channel, source)([], []) == redis_prefix.encode()
            with pytest.raises(rx.ResponseError, match="wrong number of arguments"):
                await channel.call("GET")
            # The connection survives an error reply.
            assert await channel.call("PING") == b"PONG"
        finally:
            channel.close()

    asyncio.run(run())


def test_a_redis_that_says_nothing_times_out_and_a_dropped_one_reconnects() -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(silent.accept()[0]), daemon=True).start()

    async def run() -> None:
        channel = RespChannel("127.0.0.1", silent.getsockname()[1], timeout_s=0.2)
        with pytest.raises(rx.TimeoutError):
            await channel.call("PING")
        channel.close()
        with CuttableProxy(("127.0.0.1", 6379)) as proxy:
            through = RespChannel("127.0.0.1", proxy.port, timeout_s=0.5)
            assert await through.call("PING") == b"PONG"
            proxy.cut()
            with pytest.raises(rx.ConnectionError):
                await through.call("PING")
            proxy.restore()
            assert await through.call("PING") == b"PONG"
            through.close()

    try:
        asyncio.run(run())
    finally:
        silent.close()
        for each in accepted:
            each.close()
