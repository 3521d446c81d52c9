"""The upstream client's side of the hostile-upstream tests: a started client, requests,
and scripts that answer the first request badly and every other one well."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import uvloop

from rungway.adapters.base import UpstreamRequest
from rungway.config import TimeoutSettings
from rungway.transport.http11 import Http11Transport
from tests.hostile import CHUNKED_HEAD, HostileServer, Peer, Received, Script, answer, pieces

GOOD = b'{"id":"chatcmpl-good","usage":{"prompt_tokens":3,"completion_tokens":2}}'
JSON_HEAD = CHUNKED_HEAD % b"application/json"


def run(scenario: Coroutine[Any, Any, None], limit_s: float = 10) -> None:
    """Run `scenario` on uvloop, as the gateway runs, failing it after `limit_s`."""
    # A client that hangs fails its test in seconds rather than at the suite's timeout.
    uvloop.run(asyncio.wait_for(scenario, limit_s))


def first_then_good(first: Script) -> Script:
    """The hostile `first` answer to the first request, a good answer to every other."""

    async def script(peer: Peer, request: Received) -> None:
        if request.index == 0:
            await first(peer, request)
        else:
            peer.write(answer(GOOD, "content-type: application/json"))

    return script


def writes(*data: bytes, then: str = "", pause_s: float = 0.0) -> Script:
    """A script that sends each of `data` (`pause_s` apart), then closes the connection
    when `then` is "close", or resets it when "reset"."""

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


def post(server: HostileServer, body: bytes = b'{"model":"m"}') -> UpstreamRequest:
    """A model request to `server`."""
    return UpstreamRequest(
        f"{server.url}/v1/chat/completions", {"content-type": "application/json"}, body
    )


async def send_and_read(client: Http11Transport, server: HostileServer) -> bytes:
    """Send a request and read its answer whole."""
    response = await client.send(post(server))
    return await response.read()


async def then_good(client: Http11Transport, server: HostileServer) -> None:
    """The next request gets its own answer, and no request reached the upstream twice."""
    before = len(server.requests)
    response = await client.send(post(server))
    assert response.status == 200
    assert await response.read() == GOOD
    assert len(server.requests) == before + 1


def started(timeouts: TimeoutSettings | None = None) -> Started:
    """A client to start and close with `async with`."""
    return Started(timeouts or TimeoutSettings())


class Started:
    """A started `Http11Transport`, closed at the block's end."""

    def __init__(self, timeouts: TimeoutSettings) -> None:
        self.transport = Http11Transport(timeouts)

    async def __aenter__(self) -> Http11Transport:
        await self.transport.start()
        return self.transport

    async def __aexit__(self, *exc: object) -> None:
        await self.transport.close()
