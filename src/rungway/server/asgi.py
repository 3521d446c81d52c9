"""Plain ASGI plumbing for the hot path: read a bounded body, send a reply or a stream."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from rungway.protocol.asgi import Message, Receive, Scope, Send

__all__ = ["Message", "Receive", "Scope", "Send"]

Headers = list[tuple[str, str]]


class BodyTooLarge(Exception):
    """The request body is over the configured limit."""


class ClientGone(Exception):
    """The client disconnected before its request body arrived."""


def request_headers(scope: Scope) -> dict[str, str]:
    """The request headers as a dict of lower-case names (the last of repeated ones wins)."""
    return {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}


async def read_body(receive: Receive, headers: dict[str, str], limit: int) -> bytes:
    """The whole request body, refusing more than `limit` bytes before reading them."""
    declared = headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def send_reply(send: Send, status: int, headers: Headers, body: bytes) -> None:
    """Send a complete response."""
    raw = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers]
    raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


WATCH_AFTER_S = 0.5
"""How long a stream runs before the gateway starts listening for the client hanging up."""


async def send_stream(
    send: Send, receive: Receive, status: int, headers: Headers, body: AsyncIterator[bytes]
) -> None:
    """Send a streaming response, stopping the body soon after the client disconnects.

    Listening for a disconnect takes a task of its own. It is started only once the stream
    has run for `WATCH_AFTER_S`: most streams a client abandons are long ones, a short
    stream then costs no task at all, and a client that hangs up earlier is still noticed
    within that half second, because the disconnect waits in the receive queue.
    """
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    gone = False
    watcher: asyncio.Task[None] | None = None

    async def watch_disconnect() -> None:
        nonlocal gone
        while (await receive())["type"] != "http.disconnect":
            pass
        gone = True
        task.cancel()

    def start_watching() -> None:
        nonlocal watcher
        watcher = loop.create_task(watch_disconnect())

    timer = loop.call_later(WATCH_AFTER_S, start_watching)
    raw = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers]
    try:
        await send({"type": "http.response.start", "status": status, "headers": raw})
        async for chunk in body:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    except asyncio.CancelledError:
        if not gone:
            raise
        task.uncancel()
    finally:
        timer.cancel()
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        if gone:
            await _close(body)


async def _close(body: AsyncIterator[bytes]) -> None:
    close = getattr(body, "aclose", None)
    if close is not None:
        await close()
