"""A transport over aiohttp: the pooled client that reads the plans' usage endpoints.

Model requests go through `rungway.transport.http11`, which costs a sixth of this per
request (`bench/http_cost.py`); this one also implements the whole port, and the two are
held to the same contract (`tests/unit/transport/test_contract.py`). Its `get` serves
the usage polls, which may need what a general client gives (any method, redirects).

One keep-alive pool per gateway. Three timeouts apply: connect, first byte (until the
response headers arrive) and idle (between two reads of the body). All three run on the
client's own socket timers rather than `asyncio.timeout`, which costs a system call per
use on Python 3.11. Errors surface as the port's `UpstreamTimeout` or `UpstreamUnreachable`
(`rungway.engine.transport`), already in the words a user needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

import aiohttp
from aiohttp.client_proto import ResponseHandler

from rungway.adapters.base import UpstreamRequest
from rungway.config import TimeoutSettings
from rungway.engine.transport import BODY_LIMIT, UpstreamTimeout, UpstreamUnreachable


@dataclass(slots=True)
class AiohttpResponse:
    """Response headers, and a handle to read the body (an `UpstreamResponse`)."""

    status: int
    headers: Mapping[str, str]
    _response: aiohttp.ClientResponse
    _idle_s: float

    async def read(self, limit: int = BODY_LIMIT) -> bytes:
        """The whole body, then release the connection; more than `limit` bytes is refused."""
        declared = self._response.content_length
        if declared is not None and declared > limit:
            self.close()
            raise UpstreamUnreachable(f"the upstream sent a {declared}-byte body (limit {limit})")
        try:
            body = await self._response.read()
        except aiohttp.ServerTimeoutError:
            self.close()
            raise UpstreamTimeout(f"no data for {self._idle_s:g}s while reading the body") from None
        except aiohttp.ClientError as error:
            self.close()
            raise UpstreamUnreachable(f"connection lost while reading the body: {error}") from None
        if len(body) > limit:
            raise UpstreamUnreachable(f"the upstream sent a {len(body)}-byte body (limit {limit})")
        return body

    async def next_chunk(self) -> bytes:
        """The next piece of the body as it arrives; empty at the end of the body."""
        try:
            return await self._response.content.readany()
        except aiohttp.ServerTimeoutError:
            raise UpstreamTimeout(f"the stream was idle for {self._idle_s:g}s") from None
        except aiohttp.ClientError as error:
            raise UpstreamUnreachable(f"the stream was cut off: {_describe(error)}") from None

    def close(self) -> None:
        """Drop the connection (the body was not read to its end)."""
        self._response.close()

    def release(self) -> None:
        """Return the connection to the pool (the body was read to its end)."""
        self._response.release()


class AiohttpTransport:
    """A keep-alive connection pool for all upstreams (a `Transport`)."""

    def __init__(self, timeouts: TimeoutSettings) -> None:
        self.timeouts = timeouts
        """The timeouts in force."""
        self._session: aiohttp.ClientSession | None = None
        # Reads wait first_byte_s for the response headers; after that the connection's
        # read timeout is narrowed to idle_s for the body (see `send`).
        self._request_timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=timeouts.connect_s, sock_read=timeouts.first_byte_s
        )

    async def start(self) -> None:
        """Open the pool; call from inside the running event loop."""
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=30, ttl_dns_cache=300)
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=self._request_timeout,
            # The engine reads every answer (its usage, its error), so it asks for them
            # uncompressed rather than advertise encodings it would not decode.
            headers={"Accept-Encoding": "identity"},
            auto_decompress=False,
            skip_auto_headers=("User-Agent",),
        )

    async def close(self) -> None:
        """Close every pooled connection."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def send(self, request: UpstreamRequest) -> AiohttpResponse:
        """POST `request` and return once the response headers have arrived."""
        if self._session is None:
            raise RuntimeError("AiohttpTransport.start() was not called")
        timeouts = self.timeouts
        try:
            response = await self._session.post(
                request.url, data=request.body, headers=request.headers
            )
        except aiohttp.ConnectionTimeoutError:
            raise UpstreamTimeout(f"could not connect within {timeouts.connect_s:g}s") from None
        except aiohttp.ServerTimeoutError:
            raise UpstreamTimeout(f"no response within {timeouts.first_byte_s:g}s") from None
        except aiohttp.ClientConnectorError as error:
            raise UpstreamUnreachable(_describe(error), reached=False) from None
        except aiohttp.ClientError as error:
            raise UpstreamUnreachable(_describe(error)) from None
        connection = response.connection
        if connection is not None and connection.protocol is not None:
            protocol = connection.protocol
            protocol.read_timeout = timeouts.idle_s
            # At the body's end the connection goes back to the pool while the last bytes
            # may still wait in the read buffer. Reading them resumes a paused socket, and
            # resuming re-arms the read timer on the now idle connection; once it fires,
            # the next request on that connection fails at once with a read timeout. No
            # timer after the end: the next request sets its own.
            response.content.on_eof(partial(_no_read_timer, protocol))
        return AiohttpResponse(response.status, response.headers, response, timeouts.idle_s)

    async def get(
        self, url: str, headers: Mapping[str, str], deadline_s: float, body: bytes | None = None
    ) -> tuple[int, Mapping[str, str], bytes]:
        """GET `url` (a usage endpoint), or POST `body` to it when given (an endpoint read by
        POST), and read the whole answer within `deadline_s`."""
        if self._session is None:
            raise RuntimeError("AiohttpTransport.start() was not called")
        timeout = aiohttp.ClientTimeout(total=deadline_s)
        method = "GET" if body is None else "POST"
        async with self._session.request(
            method, url, headers=dict(headers), data=body, timeout=timeout
        ) as response:
            return response.status, response.headers, await response.read()


def _no_read_timer(protocol: ResponseHandler) -> None:
    protocol.read_timeout = None


def _describe(error: aiohttp.ClientError) -> str:
    if isinstance(error, aiohttp.ClientConnectorError):
        return f"cannot connect to {error.host}:{error.port} ({error.os_error.strerror})"
    if isinstance(error, aiohttp.ServerDisconnectedError):
        return "the upstream closed the connection"
    return str(error) or type(error).__name__
