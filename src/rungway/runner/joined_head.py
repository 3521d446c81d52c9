"""uvicorn's httptools protocol, writing a response's head and body in one call."""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class JoinedHeadProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, writing a response's head and body in one call.

    uvicorn writes a response's head the moment the app starts the response, and the body
    when it comes: two socket writes, and two segments for the client to read, for a
    reply whose body follows at once. Each request's writes go through a `_JoinedHead`
    instead, which holds a head that announces a length until the body's first bytes.
    It leans on uvicorn's `cycle.transport`, so an upgrade of the pinned uvicorn must be
    checked against it.
    """

    def on_headers_complete(self) -> None:
        """Give the request's cycle a transport that joins the head to the body."""
        super().on_headers_complete()
        cycle = self.cycle
        # The new request's cycle, unless the head asked for an upgrade (there is none). A
        # HEAD request's answer is its head alone: uvicorn writes no body to join it to.
        if (
            cycle is not None
            and cycle.transport is self.transport
            and cycle.scope["method"] != "HEAD"
        ):
            cycle.transport = _JoinedHead(self.transport)


class _JoinedHead(asyncio.Transport):
    """A response's transport that holds its head, when the head announces a
    `content-length`, until the body's first write, then writes both at once; every other
    write passes straight on.

    A streamed (chunked) response has its head written at once, as has a `100 Continue`:
    the client may be waiting on them.
    """

    __slots__ = ("_head", "_transport", "_waiting")

    def __init__(self, transport: asyncio.Transport) -> None:
        super().__init__()
        self._transport = transport
        self._head: bytes | None = None
        self._waiting = True
        """No final head has been written yet."""

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Hold the response's head if it announces a length; write anything else, after a
        held head."""
        head = self._head
        if head is not None:
            self._head = None
            self._transport.writelines((head, data))
            return
        # uvicorn writes each head whole, starting with its status line; an interim
        # `HTTP/1.1 1xx` head is not the response's.
        if self._waiting and isinstance(data, bytes) and data[:10] in _FINAL_HEADS:
            self._waiting = False
            if _LENGTH in data:
                self._head = data
                return
        self._transport.write(data)

    def close(self) -> None:
        """Write a held head (the response went no further), then close."""
        head, self._head = self._head, None
        if head is not None:
            self._transport.write(head)
        self._transport.close()

    def is_closing(self) -> bool:
        """Whether the connection is closing."""
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """The connection's extra info."""
        return self._transport.get_extra_info(name, default)


_FINAL_HEADS = frozenset(b"HTTP/1.1 %d" % digit for digit in range(2, 6))
_LENGTH = b"\r\ncontent-length: "
"""How uvicorn writes a head's length header (it lower-cases every name)."""
