"""What the HTTP stack costs per request: the upstream client and the server, each
against the floor of a bare asyncio protocol.

A request through the gateway passes through two HTTP implementations: uvicorn's server
for the client's side, and the gateway's own HTTP/1.1 client (`rungway.transport.http11`)
for the upstream's. This runs one POST and the read of its JSON answer over one
kept-alive loopback connection, client and server in the same process, four ways:

- `floor`: a bare protocol client (request head and body in one write, the answer parsed
  by httptools, no pool, no timeouts) against a bare protocol server that answers with
  fixed bytes: what no stack can go below on this event loop;
- `http11`: the gateway's upstream client against the same bare server;
- `aiohttp`: aiohttp's client, set up as the gateway used it before it had its own (a
  keep-alive pool, socket timeouts, no decompression), against the same bare server;
- `uvicorn`: the bare client against uvicorn, configured as `serve` configures it,
  serving an ASGI app that reads the body and sends the same answer.

The difference from `floor` is what each library adds per request. For each it gives the
CPU time per request (best of five runs) and, with `--instructions`, the machine
instructions per request under callgrind: two runs of different lengths, differenced, so
start-up drops out.

    python bench/http_cost.py [--requests 3000] [--instructions] [--way WAY]

Needs valgrind for `--instructions` (`apt-get install valgrind`).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import httptools
import uvicorn
import uvloop

from rungway.adapters.base import UpstreamRequest
from rungway.config import TimeoutSettings
from rungway.protocol.asgi import Receive, Scope, Send
from rungway.runner import bind, uvicorn_config
from rungway.transport.http11 import Http11Transport

_REQUEST = b'{"model":"bench-chat","messages":[{"role":"user","content":"hello"}]}' * 10
_ANSWER_BODY = (
    b'{"id":"chatcmpl-1","object":"chat.completion","model":"bench-chat","choices":[{"index":0,'
    b'"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}'
) * 4
_ANSWER = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    b"x-ratelimit-limit-requests: 100\r\nx-ratelimit-remaining-requests: 99\r\n"
    b"content-length: %d\r\n\r\n%s" % (len(_ANSWER_BODY), _ANSWER_BODY)
)
_HEADERS = {"authorization": "Bearer bench-key", "content-type": "application/json"}
_WARM_UP = 300
_WAYS = ("floor", "http11", "aiohttp", "uvicorn")
_LENGTH = re.compile(rb"content-length: (\d+)", re.IGNORECASE)
_TOTALS = re.compile(rb"^(?:summary|totals):\s+(\d+)", re.MULTILINE)


class _Canned(asyncio.Protocol):
    """Answers every complete request on its connection with `_ANSWER`."""

    def __init__(self) -> None:
        self._transport: Any = None
        self._buffer = b""

    def connection_made(self, transport: Any) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while b"\r\n\r\n" in self._buffer:
            head, _, rest = self._buffer.partition(b"\r\n\r\n")
            match = _LENGTH.search(head)
            length = int(match[1]) if match else 0
            if len(rest) < length:
                return
            self._buffer = rest[length:]
            self._transport.write(_ANSWER)


class _Floor(asyncio.Protocol):
    """One kept-alive connection: write a request, await its parsed answer."""

    def __init__(self) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._transport: Any = None
        self._waiter: asyncio.Future[bytes] | None = None
        self._body: list[bytes] = []
        self.headers: list[tuple[bytes, bytes]] = []

    def connection_made(self, transport: Any) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._parser.feed_data(data)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        waiter, self._waiter = self._waiter, None
        body, self._body, self.headers = b"".join(self._body), [], []
        if waiter is not None:
            waiter.set_result(body)

    async def post(self, path: str, host: str, headers: dict[str, str], body: bytes) -> bytes:
        lines = [f"POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-length: {len(body)}\r\n"]
        lines.extend(f"{name}: {value}\r\n" for name, value in headers.items())
        head = ("".join(lines) + "\r\n").encode("latin-1")
        self._waiter = asyncio.get_running_loop().create_future()
        self._transport.writelines((head, body))
        return await self._waiter


async def _answer(scope: Scope, receive: Receive, send: Send) -> None:
    """The ASGI app uvicorn serves: read the body, send the canned answer."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    while (await receive()).get("more_body", False):
        pass
    headers = [
        (b"content-type", b"application/json"),
        (b"x-ratelimit-limit-requests", b"100"),
        (b"x-ratelimit-remaining-requests", b"99"),
        (b"content-length", str(len(_ANSWER_BODY)).encode()),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": _ANSWER_BODY})


Call = Callable[[], Awaitable[None]]


async def _client(way: str, host: str, port: int) -> tuple[Call, Call]:
    """One request of `way`'s client, and how to close the client."""
    url = f"http://{host}/v1/chat/completions"
    if way == "http11":
        transport = Http11Transport(TimeoutSettings())
        await transport.start()
        request = UpstreamRequest(url, _HEADERS, _REQUEST)

        async def one() -> None:
            response = await transport.send(request)
            await response.read()
            response.release()

        return one, transport.close
    if way == "aiohttp":
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=30),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=300),
            headers={"Accept-Encoding": "identity"},
            auto_decompress=False,
            skip_auto_headers=("User-Agent",),
        )

        async def post() -> None:
            async with session.post(url, data=_REQUEST, headers=_HEADERS) as response:
                await response.read()

        return post, session.close
    _, floor = await asyncio.get_running_loop().create_connection(_Floor, "127.0.0.1", port)

    async def bare() -> None:
        await floor.post("/v1/chat/completions", host, _HEADERS, _REQUEST)

    async def nothing() -> None:
        return None

    return bare, nothing


async def _measure(way: str, requests: int, runs: int) -> float:
    """The best CPU time per request over `runs` runs of `requests` requests."""
    loop = asyncio.get_running_loop()
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    host = f"127.0.0.1:{port}"
    if way == "uvicorn":
        server: Any = uvicorn.Server(uvicorn_config(_answer))
        serving = loop.create_task(server.serve(sockets=[sock]))
        while not server.started:  # noqa: ASYNC110 - uvicorn offers a flag, not an event
            await asyncio.sleep(0.01)
    else:
        server = await loop.create_server(_Canned, sock=sock)
    one, done = await _client(way, host, port)
    for _ in range(_WARM_UP):
        await one()
    best = float("inf")
    for _ in range(runs):
        started = time.process_time()
        for _ in range(requests):
            await one()
        best = min(best, (time.process_time() - started) / requests)
    await done()
    if way == "uvicorn":
        server.should_exit = True
        await serving
    else:
        server.close()
    return best


def _instructions(way: str, requests: int) -> int:
    """Instructions per request: callgrind totals of two run lengths, differenced."""
    totals = []
    for count in (requests // 5, requests):
        with tempfile.TemporaryDirectory(prefix="rungway-http-") as folder:
            out = Path(folder) / "callgrind.out"
            subprocess.run(
                [
                    "valgrind",
                    "--tool=callgrind",
                    f"--callgrind-out-file={out}",
                    sys.executable,
                    __file__,
                    "--way",
                    way,
                    "--requests",
                    str(count),
                    "--runs",
                    "1",
                ],
                check=True,
                capture_output=True,
            )
            match = _TOTALS.search(out.read_bytes())
            assert match is not None, "callgrind wrote no totals"
            totals.append(int(match.group(1)))
    return (totals[1] - totals[0]) // (requests - requests // 5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000, help="requests per run")
    parser.add_argument("--runs", type=int, default=5, help="runs; the cheapest counts")
    parser.add_argument("--way", choices=_WAYS, help="measure only this one")
    parser.add_argument("--instructions", action="store_true", help="also count instructions")
    args = parser.parse_args()
    for way in [args.way] if args.way else _WAYS:
        cpu = uvloop.run(_measure(way, args.requests, args.runs))
        line = f"{way}: {cpu * 1e6:.1f} µs CPU per request"
        if args.instructions:
            line += f", {_instructions(way, args.requests):,} instructions per request"
        print(line, flush=True)


if __name__ == "__main__":
    main()
