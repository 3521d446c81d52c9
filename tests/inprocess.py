"""A transport that hands each request to an ASGI app in this process: no sockets.

It implements the engine's transport port (`rungway.engine.transport`) over simulated
upstreams (`rungway.sim`), so the engine's attempt loop runs in milliseconds. Each base
URL maps to one app; a URL no app serves cannot be connected to, so its request never
happened (`UpstreamUnreachable(reached=False)`), like a refused TCP connection. An app
that raises, or returns without finishing its response, has dropped the connection (the
sim's disconnect fault does so when no socket is exposed to it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from multidict import CIMultiDict, CIMultiDictProxy

from rungway.adapters.base import UpstreamRequest
from rungway.engine.transport import BODY_LIMIT, UpstreamResponse, UpstreamUnreachable
from rungway.protocol.asgi import Message, Receive, Scope, Send

App = Callable[[Scope, Receive, Send], Awaitable[None]]

_END = object()
"""Queued after the app's last message, when it returns."""


class InProcessTransport:
    """Sends each request to the ASGI app serving its URL's origin."""

    def __init__(self, apps: Mapping[str, App]) -> None:
        self._apps = {origin.rstrip("/"): app for origin, app in apps.items()}
        self.sent: list[UpstreamRequest] = []
        """Every request sent, reachable or not, in order."""
        self.open: set[InProcessResponse] = set()
        """Responses neither released nor closed yet."""

    async def send(self, request: UpstreamRequest) -> UpstreamResponse:
        """Start the app on `request`; return once its response has started."""
        self.sent.append(request)
        url = urlsplit(request.url)
        app = self._apps.get(f"{url.scheme}://{url.netloc}")
        if app is None:
            raise UpstreamUnreachable(f"cannot connect to {url.netloc} (no app)", reached=False)
        headers = [(b"host", url.netloc.encode("latin-1"))]
        headers += [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in request.headers.items()
        ]
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": url.scheme,
            "path": url.path or "/",
            "raw_path": (url.path or "/").encode("latin-1"),
            "query_string": url.query.encode("latin-1"),
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 1),
            "server": (url.hostname or "", url.port or 80),
        }
        response = InProcessResponse(self, app, scope, request.body)
        await response.start()
        self.open.add(response)
        return response


class InProcessResponse:
    """One app's response, read from the messages it sends."""

    def __init__(
        self, transport: InProcessTransport, app: App, scope: dict[str, Any], body: bytes
    ) -> None:
        self._transport = transport
        self._body = body
        self._body_sent = False
        self._gone = asyncio.Event()
        self._messages: asyncio.Queue[Message | object] = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._run(app, scope))
        self._ended = False
        self.status = 0
        self.headers: CIMultiDictProxy[str] = CIMultiDictProxy(CIMultiDict())

    async def _run(self, app: App, scope: dict[str, Any]) -> None:
        try:
            await app(scope, self._receive, self._send)
        except Exception as error:
            await self._messages.put(error)
        else:
            await self._messages.put(_END)

    async def _receive(self) -> Message:
        if not self._body_sent:
            self._body_sent = True
            return {"type": "http.request", "body": self._body, "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: Message) -> None:
        await self._messages.put(message)

    async def start(self) -> None:
        """Wait for the response's start."""
        message = await self._messages.get()
        if not isinstance(message, dict) or message["type"] != "http.response.start":
            self._finish()
            raise UpstreamUnreachable("the upstream closed the connection")
        self.status = message["status"]
        headers: CIMultiDict[str] = CIMultiDict()
        for name, value in message.get("headers", ()):
            headers.add(name.decode("latin-1"), value.decode("latin-1"))
        self.headers = CIMultiDictProxy(headers)

    async def read(self, limit: int = BODY_LIMIT) -> bytes:
        """The whole body, then release the connection; more than `limit` bytes is refused."""
        chunks: list[bytes] = []
        while chunk := await self.next_chunk():
            chunks.append(chunk)
        self.release()
        body = b"".join(chunks)
        if len(body) > limit:
            raise UpstreamUnreachable(f"the upstream sent a {len(body)}-byte body (limit {limit})")
        return body

    async def next_chunk(self) -> bytes:
        """The next piece of the body as it arrives; empty at the end of the body."""
        while not self._ended:
            message = await self._messages.get()
            if not isinstance(message, dict):
                self._finish()
                raise UpstreamUnreachable("the stream was cut off: the upstream closed it")
            if message["type"] != "http.response.body":
                continue
            self._ended = not message.get("more_body", False)
            if message.get("body"):
                return bytes(message["body"])
        return b""

    def close(self) -> None:
        """Drop the connection: the app sees the client leave, and is stopped."""
        self._finish()
        self._task.cancel()

    def release(self) -> None:
        """The body was read to its end."""
        self._finish()

    def _finish(self) -> None:
        self._ended = True
        self._gone.set()
        self._transport.open.discard(self)
