"""The pooled HTTP client that carries every upstream request.

One keep-alive pool per gateway. Three timeouts apply: connect, first byte (until the
response headers arrive) and idle (between two reads of the body). Errors surface as
`UpstreamTimeout` or `UpstreamUnreachable`, already in the words a user needs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp

from rungway.adapters.base import UpstreamRequest
from rungway.config import TimeoutSettings


class UpstreamTimeout(Exception):
    """The upstream did not answer, or stopped sending, in time."""


class UpstreamUnreachable(Exception):
    """The upstream could not be reached, or dropped the connection.

    `reached` is False when no connection was ever made, so the request never happened.
    """

    def __init__(self, message: str, *, reached: bool = True) -> None:
        super().__init__(message)
        self.reached = reached


@dataclass(slots=True)
class UpstreamResponse:
    """Response headers, and a handle to read the body."""

    status: int
    headers: Mapping[str, str]
    _response: aiohttp.ClientResponse
    _idle_s: float

    async def read(self, limit: int = 64 * 1024 * 1024) -> bytes:
        """The whole body (at most `limit` bytes), then release the connection."""
        try:
            async with asyncio.timeout(self._idle_s):
                body = await self._response.content.read(limit)
        except TimeoutError:
            self.close()
            raise UpstreamTimeout(f"no data for {self._idle_s:g}s while reading the body") from None
        except aiohttp.ClientError as error:
            self.close()
            raise UpstreamUnreachable(f"connection lost while reading the body: {error}") from None
        self._response.release()
        return body

    async def next_chunk(self) -> bytes:
        """The next piece of the body as it arrives; empty at the end of the body."""
        try:
            async with asyncio.timeout(self._idle_s):
                return await self._response.content.readany()
        except TimeoutError:
            raise UpstreamTimeout(f"the stream was idle for {self._idle_s:g}s") from None
        except aiohttp.ClientError as error:
            raise UpstreamUnreachable(f"the stream was cut off: {_describe(error)}") from None

    def close(self) -> None:
        """Drop the connection (the body was not read to its end)."""
        self._response.close()

    def release(self) -> None:
        """Return the connection to the pool (the body was read to its end)."""
        self._response.release()


class UpstreamClient:
    """A keep-alive connection pool for all upstreams."""

    def __init__(self, timeouts: TimeoutSettings) -> None:
        self._timeouts = timeouts
        self._session: aiohttp.ClientSession | None = None
        self._request_timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=timeouts.connect_s, sock_read=None
        )

    async def start(self) -> None:
        """Open the pool; call from inside the running event loop."""
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=30, ttl_dns_cache=300)
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=self._request_timeout,
            auto_decompress=False,
            skip_auto_headers=("User-Agent",),
        )

    async def close(self) -> None:
        """Close every pooled connection."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def send(self, request: UpstreamRequest) -> UpstreamResponse:
        """POST `request` and return once the response headers have arrived."""
        if self._session is None:
            raise RuntimeError("UpstreamClient.start() was not called")
        first_byte_s = self._timeouts.first_byte_s
        try:
            async with asyncio.timeout(first_byte_s):
                response = await self._session.post(
                    request.url, data=request.body, headers=request.headers
                )
        except TimeoutError:
            raise UpstreamTimeout(f"no response within {first_byte_s:g}s") from None
        except aiohttp.ServerTimeoutError:
            raise UpstreamTimeout(
                f"could not connect within {self._timeouts.connect_s:g}s"
            ) from None
        except aiohttp.ClientConnectorError as error:
            raise UpstreamUnreachable(_describe(error), reached=False) from None
        except aiohttp.ClientError as error:
            raise UpstreamUnreachable(_describe(error)) from None
        return UpstreamResponse(response.status, response.headers, response, self._timeouts.idle_s)


def _describe(error: aiohttp.ClientError) -> str:
    if isinstance(error, aiohttp.ClientConnectorError):
        return f"cannot connect to {error.host}:{error.port} ({error.os_error.strerror})"
    if isinstance(error, aiohttp.ServerDisconnectedError):
        return "the upstream closed the connection"
    return str(error) or type(error).__name__
