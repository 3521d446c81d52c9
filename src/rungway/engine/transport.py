"""The transport port: how the engine sends a request upstream and reads the answer.

In the spirit of httpx's `BaseTransport`: `send` returns once the response headers have
arrived, and the response hands out its body whole or piece by piece. The engine knows
only these types; the gateway's HTTP/1.1 client (`rungway.transport.http11`) implements
them, and so does a transport that calls a simulated upstream in the same process (tests).

A transport states its failures in two exceptions, already in the words a user needs:
`UpstreamTimeout` and `UpstreamUnreachable`. Anything else it raises is a fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from rungway.adapters.base import UpstreamRequest

BODY_LIMIT = 64 * 1024 * 1024
"""The largest whole body `UpstreamResponse.read` accepts by default."""


class UpstreamTimeout(Exception):
    """The upstream did not answer, or stopped sending, in time."""


class UpstreamUnreachable(Exception):
    """The upstream could not be reached, or dropped the connection.

    `reached` is False when no connection was ever made, so the request never happened.
    """

    def __init__(self, message: str, *, reached: bool = True) -> None:
        super().__init__(message)
        self.reached = reached


class UpstreamResponse(Protocol):
    """Response headers, and a handle to read the body.

    The body is read either whole (`read`) or piece by piece (`next_chunk`), then the
    connection is given back: `release` after the body's end, `close` before it.
    """

    @property
    def status(self) -> int:
        """The HTTP status."""
        ...

    @property
    def headers(self) -> Mapping[str, str]:
        """The response headers; names are matched without regard to case."""
        ...

    async def read(self, limit: int = BODY_LIMIT) -> bytes:
        """The whole body, then release the connection; more than `limit` bytes is refused."""
        ...

    async def next_chunk(self) -> bytes:
        """The next piece of the body as it arrives; empty at the end of the body."""
        ...

    def close(self) -> None:
        """Drop the connection (the body was not read to its end)."""
        ...

    def release(self) -> None:
        """Return the connection to the pool (the body was read to its end)."""
        ...


class Transport(Protocol):
    """Carries the engine's requests upstream."""

    async def send(self, request: UpstreamRequest) -> UpstreamResponse:
        """POST `request` and return once the response headers have arrived."""
        ...
