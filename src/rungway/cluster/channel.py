"""The request path's own Redis connection: commands pipelined as they come.

A budget hold or a rate window is one script call on the request path. Through redis-py's
client a call costs about 150 µs of CPU on this class of machine before the network is
involved (a pooled connection taken and given back, a retry wrapper, a timeout scope, the
command packed in Python), which is most of what shared budgets add to a request. A
`RespChannel` keeps one connection open and writes each command the moment it is asked,
without waiting for the answers of those before it; Redis answers in order, so each reply
goes to the oldest waiting caller. Commands are packed and replies parsed by hiredis, the
C parser redis-py itself uses. Under load, the calls of many requests share each socket
write and read.

A command that gets no answer within the timeout, or a connection that drops, fails every
waiting call with redis-py's `ConnectionError` or `TimeoutError`, so callers handle a lost
Redis as they do from redis-py; the next call connects again. An error reply raises as
redis-py's would (`NoScriptError` when a script is not loaded).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections import deque
from collections.abc import Sequence
from ssl import SSLContext
from typing import Any, cast

import hiredis
from redis import exceptions as rx


class RespChannel:
    """One pipelined connection to Redis for the request path's script calls: TCP to
    `host:port` (TLS with an `ssl` context), or a unix socket at `path`."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        path: str | None = None,
        ssl: SSLContext | None = None,
        db: int = 0,
        username: str | None = None,
        password: str | None = None,
        timeout_s: float = 0.5,
    ) -> None:
        self._address = (host, port)
        self._path = path
        self._ssl = ssl
        self._hello: list[tuple[Any, ...]] = []
        if password is not None:
            self._hello.append(
                ("AUTH", password) if username is None else ("AUTH", username, password)
            )
        if db:
            self._hello.append(("SELECT", db))
        self._timeout_s = timeout_s
        self._protocol: _Replies | None = None
        self._connecting: asyncio.Lock | None = None

    @property
    def address(self) -> str:
        """Where it connects, as the operator wrote it (never a password)."""
        if self._path is not None:
            return f"unix:{self._path}"
        host, port = self._address
        return f"{host}:{port}"

    async def call(self, *args: str | int | bytes) -> Any:
        """Send one command and return its reply; raises as redis-py would."""
        protocol = self._protocol
        if protocol is None or protocol.closed:
            protocol = await self._connect()
        return await protocol.send(_packed(args), self._timeout_s)

    def close(self) -> None:
        """Drop the connection; waiting calls fail."""
        if self._protocol is not None:
            self._protocol.abort(rx.ConnectionError("the channel was closed"))
            self._protocol = None

    async def _connect(self) -> _Replies:
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._protocol is not None and not self._protocol.closed:
                return self._protocol
            loop = asyncio.get_running_loop()
            try:
                async with asyncio.timeout(self._timeout_s):
                    if self._path is not None:
                        _, protocol = await loop.create_unix_connection(_Replies, self._path)
                    else:
                        _, protocol = await loop.create_connection(
                            _Replies, *self._address, ssl=self._ssl
                        )
                    for command in self._hello:
                        await protocol.send(_packed(command), self._timeout_s)
            except (OSError, TimeoutError) as error:  # ssl.SSLError is an OSError
                raise rx.ConnectionError(f"Error connecting to {self.address}: {error}") from None
            self._protocol = protocol
            return protocol


class _Replies(asyncio.Protocol):
    """Matches each reply to the oldest caller still waiting."""

    def __init__(self) -> None:
        self._reader = hiredis.Reader()
        self._waiting: deque[asyncio.Future[Any]] = deque()
        self._transport: asyncio.WriteTransport | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio's, though they behave as them.
        self._transport = cast("asyncio.WriteTransport", transport)

    async def send(self, packed: bytes, timeout_s: float) -> Any:
        if self.closed or self._transport is None:
            raise rx.ConnectionError("the connection to redis was lost")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._waiting.append(future)
        self._transport.write(packed)
        # One timer per call, cheaper than a timeout scope; a late reply would be matched
        # to the wrong caller, so a timeout gives up the whole connection.
        timer = loop.call_later(timeout_s, self._timed_out)
        try:
            return await future
        finally:
            timer.cancel()

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        while True:
            try:
                reply = self._reader.gets()
            except hiredis.ProtocolError as error:
                self.abort(rx.ConnectionError(f"redis sent what is not RESP: {error}"))
                return
            if reply is False:
                return
            if not self._waiting:
                self.abort(rx.ConnectionError("redis answered a command nobody sent"))
                return
            future = self._waiting.popleft()
            if future.done():
                continue
            if isinstance(reply, hiredis.ReplyError):
                future.set_exception(_reply_error(str(reply)))
            else:
                future.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(rx.ConnectionError(f"the connection to redis was lost: {exc or 'closed'}"))

    def abort(self, error: Exception) -> None:
        """Close the connection and fail every waiting call with `error`."""
        self._fail(error)
        if self._transport is not None:
            self._transport.abort()

    def _timed_out(self) -> None:
        self.abort(rx.TimeoutError("redis did not answer in time"))

    def _fail(self, error: Exception) -> None:
        self.closed = True
        while self._waiting:
            future = self._waiting.popleft()
            if not future.done():
                future.set_exception(error)
                # Nobody may be waiting any more (the caller was cancelled).
                with contextlib.suppress(asyncio.InvalidStateError):
                    future.exception()


def _packed(args: tuple[Any, ...]) -> bytes:
    # hiredis's stub types a command as a tuple of one element; any length packs.
    packed: bytes = hiredis.pack_command(cast("tuple[str]", args))
    return packed


def _reply_error(message: str) -> rx.ResponseError:
    if message.startswith("NOSCRIPT"):
        return rx.NoScriptError(message)
    return rx.ResponseError(message)


class ChannelScript:
    """A Lua script called through a `RespChannel` by its SHA1, loaded again when Redis
    has lost it (a restart, a flush)."""

    def __init__(self, channel: RespChannel, source: str) -> None:
        self._channel = channel
        self._source = source
        self._sha = hashlib.sha1(source.encode()).hexdigest()

    async def __call__(self, keys: Sequence[str], args: Sequence[str | int]) -> Any:
        """The script's reply for `keys` and `args`."""
        try:
            return await self._channel.call("EVALSHA", self._sha, len(keys), *keys, *args)
        except rx.NoScriptError:
            await self._channel.call("SCRIPT", "LOAD", self._source)
            return await self._channel.call("EVALSHA", self._sha, len(keys), *keys, *args)
