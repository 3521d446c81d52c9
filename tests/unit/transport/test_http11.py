"""The upstream client asks for answers it can read, and reads the plans' usage endpoints."""

from __future__ import annotations

import asyncio
import gzip
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import cast

import uvloop

from rungway.adapters.base import UpstreamRequest
from rungway.config import TimeoutSettings
from rungway.transport.http11 import Http11Transport

BODY = b'{"usage":{"prompt_tokens":3,"completion_tokens":2}}'


class _Compressing(asyncio.Protocol):
    """Gzips its answer whenever the request accepts gzip, as a CDN in front of an API does."""

    def __init__(self, heads: list[bytes]) -> None:
        self._heads = heads
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio's, though they behave as them.
        self._transport = cast("asyncio.Transport", transport)

    def data_received(self, data: bytes) -> None:
        head = data.partition(b"\r\n\r\n")[0].lower()
        if head.startswith(b"get /slow"):
            self._heads.append(head)
            return  # never answers
        self._heads.append(head)
        accepts = next(
            (line for line in head.split(b"\r\n") if line.startswith(b"accept-encoding:")), b""
        )
        body, extra = BODY, b""
        if b"gzip" in accepts:
            body, extra = gzip.compress(BODY), b"content-encoding: gzip\r\n"
        assert self._transport is not None
        self._transport.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n%scontent-length: %d\r\n\r\n%s"
            % (extra, len(body), body)
        )


@asynccontextmanager
async def _serving(heads: list[bytes]) -> AsyncIterator[tuple[Http11Transport, str]]:
    """A started transport, and the base URL of a `_Compressing` server noting `heads`."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Compressing(heads), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport = Http11Transport(TimeoutSettings())
    await transport.start()
    try:
        yield transport, f"http://127.0.0.1:{port}"
    finally:
        await transport.close()
        server.close()


async def _send_once(heads: list[bytes]) -> tuple[bytes, str | None]:
    async with _serving(heads) as (transport, base):
        request = UpstreamRequest(
            f"{base}/v1/chat/completions", {"content-type": "application/json"}, b"{}"
        )
        response = await transport.send(request)
        return await response.read(), response.headers.get("content-encoding")


def test_answers_come_uncompressed_so_the_engine_can_read_them() -> None:
    heads: list[bytes] = []
    body, encoding = uvloop.run(_send_once(heads))
    assert body == BODY
    assert encoding is None
    assert b"accept-encoding: identity" in heads[0]


Answer = tuple[int, Mapping[str, str], bytes]


async def _get(
    heads: list[bytes], path: str, body: bytes | None, deadline_s: float
) -> Answer | TimeoutError:
    async with _serving(heads) as (transport, base):
        try:
            return await transport.get(base + path, {"authorization": "Bearer t"}, deadline_s, body)
        except TimeoutError as error:
            return error


def test_a_usage_endpoint_is_read_by_get_without_a_body() -> None:
    heads: list[bytes] = []
    answer = uvloop.run(_get(heads, "/api/usage?x=1", None, 5.0))
    assert not isinstance(answer, TimeoutError)
    status, headers, body = answer
    assert (status, body) == (200, BODY)
    assert headers["Content-Type"] == "application/json"
    assert heads[0].startswith(b"get /api/usage?x=1 http/1.1\r\n")
    assert b"content-length" not in heads[0]
    assert b"authorization: bearer t" in heads[0]


def test_a_usage_endpoint_read_by_post_sends_its_body() -> None:
    heads: list[bytes] = []
    answer = uvloop.run(_get(heads, "/v1internal:retrieveUserQuota", b"{}", 5.0))
    assert not isinstance(answer, TimeoutError)
    status, _, body = answer
    assert (status, body) == (200, BODY)
    assert heads[0].startswith(b"post /v1internal:retrieveuserquota http/1.1\r\n")
    assert b"content-length: 2" in heads[0]


def test_a_usage_read_past_its_deadline_is_a_timeout() -> None:
    heads: list[bytes] = []
    started = time.monotonic()
    outcome = uvloop.run(_get(heads, "/slow", None, 0.2))
    assert isinstance(outcome, TimeoutError)
    assert time.monotonic() - started < 2
