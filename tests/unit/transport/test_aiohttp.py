"""The upstream transport asks for answers it can read: never a compressed one."""

from __future__ import annotations

import asyncio
import gzip
from typing import cast

import uvloop

from rungway.adapters.base import UpstreamRequest
from rungway.config import TimeoutSettings
from rungway.transport.aiohttp import AiohttpTransport

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


async def _send_once(heads: list[bytes]) -> tuple[bytes, str | None]:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Compressing(heads), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport = AiohttpTransport(TimeoutSettings())
    await transport.start()
    try:
        request = UpstreamRequest(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            {"content-type": "application/json"},
            b"{}",
        )
        response = await transport.send(request)
        return await response.read(), response.headers.get("content-encoding")
    finally:
        await transport.close()
        server.close()


def test_answers_come_uncompressed_so_the_engine_can_read_them() -> None:
    heads: list[bytes] = []
    body, encoding = uvloop.run(_send_once(heads))
    assert body == BODY
    assert encoding is None
    assert b"accept-encoding: identity" in heads[0]
