"""The gateway's upstream client: keep-alive HTTP/1.1 on asyncio protocols and httptools.

It carries every model request upstream (the engine's transport) and every read of a
plan's usage endpoint: the head and body written in one call, the answer parsed by
httptools (the parser the gateway's own server uses). Connections are kept per upstream
(scheme, host, port, and the proxy in between) and reused last-in first-out; one idle past
`KEEPALIVE_S` is closed rather than reused. It does only what the gateway needs, which makes
a request cost about a third of what a general client spends on it (`bench/http_cost.py`):
no cookies, redirects, compression or retries. Which proxy a request takes (its
connection's `proxy:`, else the environment's variables) is `rungway.egress`'s, the tunnel
`rungway.transport.proxy`'s; a request without a proxy pays nothing for them.

Timeouts: connect, first byte (from the request's write to the answer's head) and idle
(while a read of the body waits for data). Failures surface as the port's
`UpstreamTimeout` or `UpstreamUnreachable` (`rungway.engine.transport`), in the words a
user needs. Answers are asked for uncompressed, since the engine reads every one. What
it refuses of an answer (a head too large, a 101, broken framing, bytes after the answer)
is `rungway.transport.connection`'s.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from yarl import URL

from rungway.adapters.base import UpstreamRequest
from rungway.config import TimeoutSettings
from rungway.egress import Proxy, ProxyEnvironment, is_direct, parse_proxy
from rungway.engine.transport import BODY_LIMIT, UpstreamTimeout, UpstreamUnreachable
from rungway.transport.connection import Connection, Lost
from rungway.transport.proxy import open_tunnel

KEEPALIVE_S = 30.0
"""How long an idle connection is kept for reuse."""
MAX_IDLE = 256
"""The most idle connections kept per upstream; more are closed as they come back."""
_FIXED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
"""Request headers this client writes itself."""


@dataclass(frozen=True, slots=True)
class _Target:
    """What a URL's requests need: the pool key, the address, and what follows the
    method in the request's head."""

    key: tuple[str, str, int]
    """(scheme, host, port) of the upstream; through a proxy, the scheme names the proxy too."""
    host: str
    port: int
    tls: bool
    start: str
    """The rest of the request line (` /path?query HTTP/1.1`) and the Host header."""
    proxy: Proxy | None = None
    forwarded: bool = False
    """The request goes to the HTTP proxy itself with an absolute URL (an http upstream);
    `host` and `port` are then the proxy's. Otherwise a proxy opens a tunnel to them."""


class Http11Transport:
    """A keep-alive connection pool for all upstreams (a `Transport`)."""

    def __init__(self, timeouts: TimeoutSettings, proxies: ProxyEnvironment | None = None) -> None:
        self.timeouts = timeouts
        """The timeouts in force."""
        self.proxies = proxies if proxies is not None else ProxyEnvironment.read(os.environ)
        """The environment's proxies, for requests whose connection names none."""
        self._idle: dict[tuple[str, str, int], deque[Connection]] = {}
        self._targets: dict[str | tuple[str, str], _Target] = {}
        self._tls: ssl.SSLContext | None = None
        self._open = False

    async def start(self) -> None:
        """Open the pool; call from inside the running event loop."""
        self._open = True

    async def close(self) -> None:
        """Close every idle connection; connections in use close as their answers end."""
        self._open = False
        for idle in self._idle.values():
            while idle:
                idle.pop().close()
        self._idle.clear()

    async def send(self, request: UpstreamRequest) -> Http11Response:
        """POST `request` and return once the answer's head has arrived."""
        return await self._request(
            "POST", request.url, request.headers, request.body, request.proxy
        )

    async def get(
        self,
        url: str,
        headers: Mapping[str, str],
        deadline_s: float,
        body: bytes | None = None,
        proxy: str | None = None,
    ) -> tuple[int, Mapping[str, str], bytes]:
        """GET `url` (a usage endpoint), or POST `body` to it when given (an endpoint read by
        POST), and read the whole answer within `deadline_s`; past it, `TimeoutError`.
        `proxy` is the connection's `proxy:` setting (None: the environment decides)."""
        method = "GET" if body is None else "POST"
        async with asyncio.timeout(deadline_s):
            response = await self._request(method, url, headers, body, proxy)
            return response.status, response.headers, await response.read()

    async def _request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None,
        proxy: str | None = None,
    ) -> Http11Response:
        if not self._open:
            raise RuntimeError("Http11Transport.start() was not called")
        target = self._target(url, proxy)
        head = _head(method, target, headers, body)
        connection = self._reuse(target.key) or await self._connect(target)
        connection.begin()
        connection.transport.writelines((head, body or b""))
        try:
            status, answer = await connection.head(self.timeouts.first_byte_s)
        except BaseException:
            connection.close()
            raise
        if status == 407 and target.forwarded:
            connection.close()
            raise UpstreamUnreachable(_refused(target), reached=False)
        return Http11Response(status, answer, connection, self, self.timeouts.idle_s)

    def give_back(self, connection: Connection) -> None:
        """Keep a connection whose answer was read whole for the next request."""
        if not self._open or not connection.reusable():
            connection.close()
            return
        idle = self._idle.setdefault(connection.key, deque())
        if len(idle) >= MAX_IDLE:
            connection.close()
            return
        connection.idle_since = asyncio.get_running_loop().time()
        idle.append(connection)

    def _reuse(self, key: tuple[str, str, int]) -> Connection | None:
        idle = self._idle.get(key)
        if not idle:
            return None
        stale = asyncio.get_running_loop().time() - KEEPALIVE_S
        # The oldest are on the left: close those idle too long, then take the newest.
        while idle and idle[0].idle_since < stale:
            idle.popleft().close()
        while idle:
            connection = idle.pop()
            if connection.reusable():
                return connection
            connection.close()
        return None

    async def _connect(self, target: _Target) -> Connection:
        if target.proxy is not None:
            return await self._connect_through(target, target.proxy)
        loop = asyncio.get_running_loop()
        timeout = self.timeouts.connect_s
        tls = self._tls_context() if target.tls else None
        try:
            _, connection = await asyncio.wait_for(
                loop.create_connection(
                    lambda: Connection(target.key),
                    target.host,
                    target.port,
                    ssl=tls,
                    server_hostname=target.host if tls is not None else None,
                ),
                timeout,
            )
        except TimeoutError:
            raise UpstreamTimeout(f"could not connect within {timeout:g}s") from None
        except OSError as error:
            reason = error.strerror or str(error) or type(error).__name__
            raise UpstreamUnreachable(
                f"cannot connect to {target.host}:{target.port} ({reason})", reached=False
            ) from None
        return connection

    async def _connect_through(self, target: _Target, proxy: Proxy) -> Connection:
        """A connection to the HTTP proxy itself (a forwarded target), or to the upstream
        through a tunnel the proxy opens; each failure names the proxy."""
        loop = asyncio.get_running_loop()
        timeout = self.timeouts.connect_s
        tls = self._tls_context() if target.tls else None
        where = f"{target.host}:{target.port}"
        try:
            async with asyncio.timeout(timeout):
                if target.forwarded:
                    _, connection = await loop.create_connection(
                        lambda: Connection(target.key), target.host, target.port
                    )
                    return connection
                # The tunnel's own timeout is the connect timeout too; the outer one also
                # covers the TLS handshake inside it.
                sock = await open_tunnel(proxy, target.host, target.port, timeout)
                try:
                    _, connection = await loop.create_connection(
                        lambda: Connection(target.key),
                        sock=sock,
                        ssl=tls,
                        server_hostname=target.host if tls is not None else None,
                    )
                except BaseException:
                    sock.close()
                    raise
                return connection
        except TimeoutError:
            raise UpstreamTimeout(
                f"could not connect to {where} through the proxy {proxy} within {timeout:g}s"
            ) from None
        except OSError as error:
            reason = _reason(error)
            if target.forwarded:
                message = f"cannot connect to the proxy {proxy} ({reason})"
            else:
                message = f"cannot connect to {where} through the proxy {proxy} ({reason})"
            raise UpstreamUnreachable(message, reached=False) from None

    def _tls_context(self) -> ssl.SSLContext:
        # Made on the first TLS connection: loading the trust store costs some 30 ms,
        # which a gateway serving only local upstreams never needs.
        if self._tls is None:
            context = ssl.create_default_context()
            context.set_alpn_protocols(["http/1.1"])
            self._tls = context
        return self._tls

    def _target(self, url: str, proxy: str | None) -> _Target:
        """The target for `url` through the connection's `proxy` setting (None: the
        environment's choice, made once per URL)."""
        key = url if proxy is None else (url, proxy)
        target = self._targets.get(key)
        if target is None:
            if len(self._targets) >= 4096:  # URLs carrying model names are many, not endless
                self._targets.clear()
            target = self._targets[key] = _parse(url, self._proxy_for(proxy))
        return target

    def proxy_for(self, url: str, proxy: str | None = None) -> Proxy | None:
        """The proxy a request to `url` goes through, given its connection's `proxy:`
        setting (None: the environment's choice); None when it goes direct."""
        return self._target(url, proxy).proxy

    def _proxy_for(self, setting: str | None) -> Callable[[str, str, int], Proxy | None]:
        """How a target's proxy is chosen from a connection's setting."""
        if setting is None:
            return self.proxies.choose
        chosen = None if is_direct(setting) else parse_proxy(setting)
        return lambda _scheme, _host, _port: chosen


class Http11Response:
    """An answer's status and headers, and a handle to read its body (an `UpstreamResponse`)."""

    __slots__ = ("_connection", "_done", "_idle_s", "_pool", "headers", "status")

    def __init__(
        self,
        status: int,
        headers: Mapping[str, str],
        connection: Connection,
        pool: Http11Transport,
        idle_s: float,
    ) -> None:
        self.status = status
        self.headers = headers
        self._connection = connection
        self._pool = pool
        self._idle_s = idle_s
        self._done = False

    async def read(self, limit: int = BODY_LIMIT) -> bytes:
        """The whole body, then release the connection; more than `limit` bytes is refused."""
        declared = _length(self.headers.get("content-length"))
        if declared is not None and declared > limit:
            self.close()
            raise UpstreamUnreachable(f"the upstream sent a {declared}-byte body (limit {limit})")
        connection = self._connection
        idle = f"no data for {self._idle_s:g}s while reading the body"
        # Read on past the stream's pause: the limit, not the reader, bounds what is kept.
        connection.read_whole(limit)
        try:
            while not connection.complete and connection.buffered <= limit:
                await connection.more(self._idle_s, idle)
        except Lost as lost:
            self.close()
            raise UpstreamUnreachable(f"connection lost while reading the body: {lost}") from None
        except BaseException:
            self.close()
            raise
        if connection.buffered > limit:
            self.close()
            raise UpstreamUnreachable(
                f"the upstream sent a body over its limit, refused at {connection.buffered} "
                f"bytes (limit {limit})"
            )
        body = connection.take()
        self.release()
        return body

    async def next_chunk(self) -> bytes:
        """What has arrived of the body since the last call, waiting for some; empty at
        the end of the body."""
        connection = self._connection
        if not connection.buffered and not connection.complete:
            idle = f"the stream was idle for {self._idle_s:g}s"
            try:
                await connection.more(self._idle_s, idle)
            except Lost as lost:
                raise UpstreamUnreachable(f"the stream was cut off: {lost}") from None
        return connection.take()

    def close(self) -> None:
        """Drop the connection (the body was not read to its end)."""
        if not self._done:
            self._done = True
            self._connection.close()

    def release(self) -> None:
        """Return the connection to the pool (the body was read to its end)."""
        if not self._done:
            self._done = True
            if self._connection.complete:
                self._pool.give_back(self._connection)
            else:
                self._connection.close()


def _parse(url: str, proxy_for: Callable[[str, str, int], Proxy | None]) -> _Target:
    parsed = URL(url)
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError(f"not an http(s) URL: {url!r}")
    scheme, host, tls = parsed.scheme, parsed.host, parsed.scheme == "https"
    port = parsed.port or (443 if tls else 80)
    authority = parsed.host_port_subcomponent
    proxy = proxy_for(scheme, host, port)
    if proxy is None:
        start = f" {parsed.raw_path_qs} HTTP/1.1\r\nHost: {authority}\r\n"
        return _Target((scheme, host, port), host, port, tls, start)
    key = (f"{scheme} via {proxy.identity}", host, port)
    if proxy.kind == "http" and not tls:
        # As curl sends it: the whole URL in the request line, to the proxy, which keeps
        # its connection open for the next request to any upstream.
        start = f" {scheme}://{authority}{parsed.raw_path_qs} HTTP/1.1\r\nHost: {authority}\r\n"
        authorization = proxy.authorization()
        if authorization is not None:
            start += f"Proxy-Authorization: {authorization}\r\n"
        return _Target(key, proxy.host, proxy.port, False, start, proxy, forwarded=True)
    start = f" {parsed.raw_path_qs} HTTP/1.1\r\nHost: {authority}\r\n"
    return _Target(key, host, port, tls, start, proxy)


def _reason(error: OSError) -> str:
    """What failed, in words: a TLS error's own, else the socket error number's."""
    if isinstance(error, ssl.SSLError) or not error.errno:
        return str(error) or type(error).__name__
    return os.strerror(error.errno)


def _refused(target: _Target) -> str:
    """A forwarding proxy's 407, in words: its credentials were not accepted."""
    return (
        f"the proxy {target.proxy} refused the request: 407 Proxy Authentication Required "
        "(the proxy's user name or password is wrong or missing)"
    )


def _head(method: str, target: _Target, headers: Mapping[str, str], body: bytes | None) -> bytes:
    """The request's head: the request line, Host, its own headers, then the body's length
    (none for a request without a body)."""
    lines = [method, target.start]
    encoding = accept = False
    for name, value in headers.items():
        if "\r" in name or "\n" in name or "\r" in value or "\n" in value:
            raise ValueError(f"the upstream request header {name!r} holds a line break")
        lowered = name.lower()
        if lowered in _FIXED_HEADERS:
            continue
        encoding = encoding or lowered == "accept-encoding"
        accept = accept or lowered == "accept"
        lines.append(f"{name}: {value}\r\n")
    if not accept:
        lines.append("Accept: */*\r\n")
    if not encoding:
        lines.append("Accept-Encoding: identity\r\n")
    lines.append("\r\n" if body is None else f"Content-Length: {len(body)}\r\n\r\n")
    return "".join(lines).encode("utf-8")


def _length(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None
