"""Raw ASGI plumbing for the simulated upstreams: reading requests, sending replies,
streaming, mixed-case header names, and dropping a connection on purpose.

The sims are the baseline of a latency benchmark, so this layer is plain ASGI with
orjson and no framework.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from rungway.protocol.asgi import Receive, Scope, Send

Header = tuple[bytes, bytes]
"""One header: its name and value as bytes."""
JSON_CONTENT_TYPE = (b"content-type", b"application/json")
SSE_CONTENT_TYPE = (b"content-type", b"text/event-stream; charset=utf-8")

# The uvicorn protocol used by SimUpstream puts the connection's transport here, so a
# fault can close the socket itself (see server.SimHttpProtocol).
TRANSPORT_EXTENSION = "rungway.sim.transport"


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the upstream received it."""

    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    raw_body: bytes = field(repr=False)
    body: Any = None

    def header(self, name: str) -> str | None:
        """A header's value (names are case-insensitive; repeats are comma-joined)."""
        return self.headers.get(name.lower())


@dataclass(frozen=True, slots=True)
class Reply:
    """A complete, non-streamed HTTP response."""

    status: int
    body: bytes
    headers: tuple[Header, ...] = ()
    quota: tuple[Header, ...] = ()


class MixedCaseName(bytes):
    """A header name that keeps its capitals on the wire.

    ASGI servers lower-case response header names by calling `.lower()` on them; this
    name answers with itself, so `Anthropic-Ratelimit-Unified-Status` reaches the
    client as written and clients' case-insensitive parsing gets exercised.
    """

    def lower(self) -> bytes:
        """Return the name unchanged (see the class docstring)."""
        return self


def mixed_case(headers: list[Header] | tuple[Header, ...]) -> list[Header]:
    """Title-case each header name (`x-ratelimit-limit-tokens` -> `X-Ratelimit-Limit-Tokens`)."""
    return [
        (MixedCaseName(b"-".join(part.capitalize() for part in name.split(b"-"))), value)
        for name, value in headers
    ]


async def read_request(scope: Scope, receive: Receive) -> RecordedRequest:
    """Read the whole body and capture the request for later assertions."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    raw = b"".join(chunks)
    headers: dict[str, str] = {}
    for name_bytes, value_bytes in scope["headers"]:
        name = name_bytes.decode("latin-1").lower()
        value = value_bytes.decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    body: Any = None
    if raw:
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = None
    return RecordedRequest(
        method=scope["method"],
        path=scope["path"],
        query=scope.get("query_string", b"").decode("latin-1"),
        headers=headers,
        raw_body=raw,
        body=body,
    )


def json_reply(status: int, payload: object, headers: tuple[Header, ...] = ()) -> Reply:
    """A JSON reply."""
    return Reply(status, orjson.dumps(payload), headers)


async def send_reply(send: Send, reply: Reply, cased: bool = False) -> None:
    """Send `reply`; with `cased` its quota headers go out with capitalised names."""
    quota = mixed_case(reply.quota) if cased else list(reply.quota)
    headers = [
        JSON_CONTENT_TYPE,
        (b"content-length", str(len(reply.body)).encode()),
        *reply.headers,
        *quota,
    ]
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": reply.body})


async def start_stream(send: Send, headers: list[Header]) -> None:
    """Send the 200 head of a stream: an event stream unless `headers` name a content type
    (Gemini's stream without `alt=sse` is a JSON array)."""
    typed = any(name.lower() == b"content-type" for name, _ in headers)
    head = [*(() if typed else (SSE_CONTENT_TYPE,)), (b"cache-control", b"no-cache"), *headers]
    await send({"type": "http.response.start", "status": 200, "headers": head})


async def send_chunk(send: Send, body: bytes) -> None:
    """Send part of a streamed body."""
    await send({"type": "http.response.body", "body": body, "more_body": True})


async def end_stream(send: Send) -> None:
    """Finish a streamed body cleanly (the chunked-encoding terminator)."""
    await send({"type": "http.response.body", "body": b"", "more_body": False})


class ConnectionDropped(Exception):
    """Raised to make the ASGI server close the connection when no transport is exposed."""


async def drop_connection(scope: Scope, receive: Receive) -> None:
    """Close the client's TCP connection without finishing the response.

    Bytes already sent are flushed first, so a stream ends after its last whole event
    with no terminator; before any response the client sees the server disconnect.
    """
    transport = scope.get("extensions", {}).get(TRANSPORT_EXTENSION, {}).get("transport")
    if transport is None:
        raise ConnectionDropped
    transport.close()
    # Wait for the server to notice, so it does not treat the unfinished response as an
    # application error.
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(2):
            while (await receive())["type"] != "http.disconnect":
                pass


async def wait_for_disconnect(receive: Receive, seconds: float) -> bool:
    """Sleep up to `seconds`; return True early if the client went away meanwhile."""
    try:
        async with asyncio.timeout(seconds):
            while (await receive())["type"] != "http.disconnect":
                pass
    except TimeoutError:
        return False
    return True
