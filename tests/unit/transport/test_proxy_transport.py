"""The upstream client through a real proxy (pproxy): HTTP forwarding, CONNECT tunnels
with TLS inside, SOCKS5, refused credentials, and a pool that keeps each route apart."""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import cast

import orjson
import pytest
import uvloop

from rungway.config import TimeoutSettings
from rungway.egress import ProxyEnvironment
from rungway.engine.transport import UpstreamTimeout, UpstreamUnreachable
from rungway.transport.http11 import Http11Transport
from tests.egress_proxy import EgressProxy
from tests.private_redis import make_certificates

PASSWORD = "pr0xy-s3cret"


class _Echo(asyncio.Protocol):
    """Answers each request with its request line and Host header, keeping the connection."""

    def __init__(self, seen: list[str], accepted: list[asyncio.Transport]) -> None:
        self._seen = seen
        self._accepted = accepted
        self._buffer = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast("asyncio.Transport", transport)
        self._accepted.append(self._transport)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while b"\r\n\r\n" in self._buffer:
            head, _, self._buffer = self._buffer.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            self._seen.append(lines[0])
            body = orjson.dumps({"line": lines[0], "headers": lines[1:]})
            assert self._transport is not None
            self._transport.write(
                b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
            )


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EgressProxy]:
    with EgressProxy(tmp_path_factory.mktemp("pproxy"), user="alice", password=PASSWORD) as p:
        yield p


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    found = make_certificates(tmp_path_factory.mktemp("tls"))
    return found.ca, found.cert, found.key


@asynccontextmanager
async def _upstream(
    seen: list[str], tls: ssl.SSLContext | None = None, environ: dict[str, str] | None = None
) -> AsyncIterator[tuple[Http11Transport, int]]:
    """A started client (the environment's proxies from `environ`), and an echoing upstream's
    port (TLS with `tls`)."""
    loop = asyncio.get_running_loop()
    accepted: list[asyncio.Transport] = []
    server = await loop.create_server(lambda: _Echo(seen, accepted), "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    timeouts = TimeoutSettings(connect_s=3, first_byte_s=3, idle_s=3)
    client = Http11Transport(timeouts, ProxyEnvironment.read(environ or {}))
    await client.start()
    try:
        yield client, port
    finally:
        await client.close()
        server.close()
        for transport in accepted:
            transport.close()
        await asyncio.sleep(0.01)  # the closes take effect before the loop ends


def _server_tls(certificates: tuple[Path, Path, Path]) -> ssl.SSLContext:
    _, cert, key = certificates
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


def test_an_http_upstream_gets_the_request_through_the_http_proxy(proxy: EgressProxy) -> None:
    async def run() -> tuple[list[str], int]:
        seen: list[str] = []
        async with _upstream(seen) as (client, port):
            url = f"http://127.0.0.1:{port}/v1/models"
            for _ in range(3):
                status, _, _ = await client.get(url, {}, 5, proxy=proxy.url("http"))
                assert status == 200
            return seen, port

    routes_before = len(proxy.routes())
    seen, port = uvloop.run(run())
    assert seen == ["GET /v1/models HTTP/1.1"] * 3
    # One kept-alive connection to the proxy carried all three requests.
    assert proxy.routes()[routes_before:] == [f"127.0.0.1:{port}"]


def test_an_https_upstream_is_reached_by_a_connect_tunnel_with_tls_inside(
    proxy: EgressProxy, certificates: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificates[0]))

    async def run() -> tuple[int, list[str], int]:
        seen: list[str] = []
        async with _upstream(seen, _server_tls(certificates)) as (client, port):
            url = f"https://localhost:{port}/v1/models"
            status, _, body = await client.get(url, {}, 5, proxy=proxy.url("http"))
            assert orjson.loads(body)["line"] == "GET /v1/models HTTP/1.1"
            return status, seen, port

    status, seen, port = uvloop.run(run())
    assert status == 200
    assert seen == ["GET /v1/models HTTP/1.1"]
    assert proxy.routes()[-1] == f"localhost:{port}"


@pytest.mark.parametrize("scheme", ["socks5", "socks5h"])
def test_socks5_carries_a_tls_upstream(
    scheme: str,
    proxy: EgressProxy,
    certificates: tuple[Path, Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificates[0]))

    async def run() -> tuple[int, int]:
        async with _upstream([], _server_tls(certificates)) as (client, port):
            url = f"https://localhost:{port}/v1/models"
            status, _, _ = await client.get(url, {}, 5, proxy=proxy.url(scheme))
            return status, port

    status, port = uvloop.run(run())
    assert status == 200
    # socks5h hands the proxy the name; socks5 resolves it here first.
    expected = "localhost" if scheme == "socks5h" else "127.0.0.1"
    assert proxy.routes()[-1] == f"{expected}:{port}"


@pytest.mark.parametrize(("scheme", "tls"), [("http", False), ("http", True), ("socks5h", False)])
def test_a_wrong_proxy_password_is_refused_before_the_upstream_is_reached(
    scheme: str,
    tls: bool,
    proxy: EgressProxy,
    certificates: tuple[Path, Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificates[0]))

    async def run() -> tuple[UpstreamUnreachable, list[str]]:
        seen: list[str] = []
        server_tls = _server_tls(certificates) if tls else None
        async with _upstream(seen, server_tls) as (client, port):
            url = f"{'https' if tls else 'http'}://localhost:{port}/v1/models"
            wrong = proxy.url(scheme, password="wrong-password")
            with pytest.raises(UpstreamUnreachable) as raised:
                await client.get(url, {}, 5, proxy=wrong)
            return raised.value, seen

    error, seen = uvloop.run(run())
    assert seen == []
    assert not error.reached
    message = str(error)
    assert f"{scheme}://alice:***@127.0.0.1:{proxy.port}" in message
    assert "wrong-password" not in message
    assert "refused" in message


def test_a_proxy_that_does_not_listen_is_named_in_the_failure() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        unused_port = probe.getsockname()[1]

    async def run() -> UpstreamUnreachable:
        async with _upstream([]) as (client, port):
            dead = f"socks5h://bob:n0t-shown@127.0.0.1:{unused_port}"
            with pytest.raises(UpstreamUnreachable) as raised:
                await client.get(f"http://127.0.0.1:{port}/", {}, 5, proxy=dead)
            return raised.value

    error = uvloop.run(run())
    assert str(error).startswith(
        f"cannot connect to the proxy socks5h://bob:***@127.0.0.1:{unused_port}"
    )
    assert not error.reached


def test_an_upstream_certificate_not_trusted_fails_inside_the_tunnel(
    proxy: EgressProxy, certificates: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tunnel carries TLS end to end: the upstream's certificate is checked, not the proxy's.
    monkeypatch.setenv("SSL_CERT_FILE", "/nonexistent")
    monkeypatch.setenv("SSL_CERT_DIR", "/nonexistent")

    async def run() -> tuple[UpstreamUnreachable, int]:
        async with _upstream([], _server_tls(certificates)) as (client, port):
            with pytest.raises(UpstreamUnreachable) as raised:
                await client.get(f"https://localhost:{port}/", {}, 5, proxy=proxy.url())
            return raised.value, port

    error, port = uvloop.run(run())
    assert str(error).startswith(
        f"cannot connect to localhost:{port} through the proxy http://alice:***@127.0.0.1:"
    )
    assert "certificate verify failed" in str(error)


def test_a_proxy_that_never_answers_times_out_naming_it() -> None:
    async def run() -> UpstreamTimeout:
        loop = asyncio.get_running_loop()
        # Accepts, then says nothing: a proxy stuck before its CONNECT reply.
        silent = await loop.create_server(asyncio.Protocol, "127.0.0.1", 0)
        silent_port = silent.sockets[0].getsockname()[1]
        client = Http11Transport(TimeoutSettings(connect_s=0.3), ProxyEnvironment())
        await client.start()
        try:
            with pytest.raises(UpstreamTimeout) as raised:
                await client.get(
                    "https://api.example:443/", {}, 5, proxy=f"http://127.0.0.1:{silent_port}"
                )
            return raised.value
        finally:
            await client.close()
            silent.close()

    error = uvloop.run(run())
    assert "through the proxy http://127.0.0.1:" in str(error)
    assert "within 0.3s" in str(error)


def test_the_environment_proxy_is_used_unless_the_connection_says_direct(
    proxy: EgressProxy,
) -> None:
    async def run() -> tuple[int, int]:
        async with _upstream([], environ={"HTTP_PROXY": proxy.url()}) as (client, port):
            url = f"http://127.0.0.1:{port}/x"
            before = len(proxy.routes())
            await client.get(url, {}, 5)
            through = len(proxy.routes()) - before
            await client.get(url, {}, 5, proxy="direct")
            # The direct request did not reuse the proxied connection, nor open another.
            return through, len(proxy.routes()) - before

    through, total = uvloop.run(run())
    assert (through, total) == (1, 1)


def test_no_proxy_sends_a_named_host_direct(proxy: EgressProxy) -> None:
    environ = {"http_proxy": proxy.url(), "no_proxy": "localhost,127.0.0.1"}

    async def run() -> int:
        async with _upstream([], environ=environ) as (client, port):
            before = len(proxy.routes())
            status, _, _ = await client.get(f"http://127.0.0.1:{port}/x", {}, 5)
            assert status == 200
            return len(proxy.routes()) - before

    assert uvloop.run(run()) == 0


def test_connections_through_different_proxy_credentials_are_pooled_apart(
    proxy: EgressProxy,
) -> None:
    async def run() -> tuple[int, int]:
        async with _upstream([]) as (client, port):
            url = f"http://127.0.0.1:{port}/x"
            await client.get(url, {}, 5, proxy=proxy.url())
            # The same URL with another password must not ride the authenticated connection.
            with pytest.raises(UpstreamUnreachable):
                await client.get(url, {}, 5, proxy=proxy.url(password="another-one"))
            status, _, _ = await client.get(url, {}, 5, proxy=proxy.url())
            return status, proxy.refusals()

    status, refusals = uvloop.run(run())
    assert status == 200
    assert refusals >= 1


def test_a_proxied_http_request_names_the_whole_url_and_the_proxy_credentials() -> None:
    async def run() -> list[str]:
        heads: list[str] = []
        loop = asyncio.get_running_loop()
        # The proxy itself, as the wire shows it: it records the head and answers.
        accepted: list[asyncio.Transport] = []
        server = await loop.create_server(lambda: _Echo(heads, accepted), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = Http11Transport(TimeoutSettings(), ProxyEnvironment())
        await client.start()
        try:
            proxy = f"http://al%40ice:{PASSWORD}@127.0.0.1:{port}"
            _, _, body = await client.get("http://api.example:8080/v1/x?y=1", {}, 5, proxy=proxy)
            return [*heads, *orjson.loads(body)["headers"]]
        finally:
            await client.close()
            server.close()
            for transport in accepted:
                transport.close()
            await asyncio.sleep(0.01)

    lines = uvloop.run(run())
    assert lines[0] == "GET http://api.example:8080/v1/x?y=1 HTTP/1.1"
    assert "Host: api.example:8080" in lines
    credentials = base64.b64encode(f"al@ice:{PASSWORD}".encode()).decode()
    assert f"Proxy-Authorization: Basic {credentials}" in lines
