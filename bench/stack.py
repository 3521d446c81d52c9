"""Benchmark the ASGI server and upstream HTTP client candidates for rungway.

What it measures (everything on 127.0.0.1, bounded request counts, ~1-3 minutes):

1. ``clients``: upstream HTTP clients -- ``httpx.AsyncClient`` (HTTP/1.1, keep-alive pool) vs
   ``aiohttp.ClientSession`` (keep-alive pool, ``TCPConnector(limit=...)``). Each POSTs a
   ~300-byte JSON body and reads a ~600-byte JSON response (``json``), and reads a 10-chunk SSE
   response chunk by chunk (``sse``). The upstream is a minimal raw ASGI app served by uvicorn
   (uvloop + httptools) in a subprocess; the client runs in another subprocess on uvloop.
2. ``servers``: uvicorn (uvloop + httptools, no access log) vs granian (ASGI, 1 worker, uvloop,
   HTTP/1, no access log) serving (i) a raw ASGI app and (ii) the same raw-ASGI endpoint behind a
   ``starlette.routing.Router``. Load generator: an aiohttp client in a separate process. Idle
   RSS (summed over the server's process tree) is read from /proc before any load. Because
   router overhead is below run-to-run noise over sockets, the raw-vs-Router dispatch cost is
   also measured in-process (no server, no I/O) and reported per request.
3. ``proxy``: server X + client Y running a pass-through handler (receive body, POST it to the
   upstream, return the upstream body) for 2-3 combinations; reports the latency it adds over
   calling the upstream directly (direct baseline measured before and after, averaged).

Every measurement is closed-loop: ``concurrency`` workers each send requests back to back over
kept-alive connections; each request is timed with ``time.perf_counter_ns``; a warm-up batch at
the same concurrency runs first and is discarded. Reported: p50/p99 per request (microseconds)
and requests/s at concurrency 1 and 16. Child processes inherit the interpreter running this
script (``sys.executable``), so run it once per interpreter:

    /tmp/rw-venv/bin/python bench/stack.py            # unoptimised interpreter
    /tmp/rw-venv-opt/bin/python bench/stack.py        # optimised interpreter
    python bench/stack.py --quick --parts servers,proxy --json-out /tmp/stack.json
    python bench/stack.py --combos uvicorn+aiohttp,granian+aiohttp --pin

It is a benchmark, not a test: it asserts nothing about the numbers. All subprocesses run in
their own process group with a parent-death signal and are killed on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final, Protocol

# --------------------------------------------------------------------------------------------
# Payloads
# --------------------------------------------------------------------------------------------

HOST: Final = "127.0.0.1"
JSON_PATH: Final = "/v1/chat/completions"
SSE_PATH: Final = "/v1/stream"


def _request_body() -> bytes:
    body = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are a terse assistant used by a benchmark."},
            {"role": "user", "content": "Summarise the plot of Hamlet in one short sentence."},
        ],
        "max_tokens": 64,
        "temperature": 0.2,
        "stream": False,
        "user": "bench-" + "x" * 60,
    }
    return json.dumps(body, separators=(",", ":")).encode()


def _response_body() -> bytes:
    body = {
        "id": "chatcmpl-" + "a" * 29,
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_0123456789",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": (
                        "Prince Hamlet feigns madness to avenge his father's murder by his "
                        "uncle Claudius, and nearly everyone, Hamlet included, ends up dead. "
                        "The court of Denmark is left to Fortinbras of Norway."
                    ),
                    "refusal": None,
                },
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 31,
            "completion_tokens": 48,
            "total_tokens": 79,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        },
        "service_tier": "default",
    }
    return json.dumps(body, separators=(",", ":")).encode()


def _sse_chunks() -> list[bytes]:
    chunks: list[bytes] = []
    for i in range(9):
        event = {
            "id": "chatcmpl-" + "a" * 29,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": f"token{i} "}}],
        }
        chunks.append(b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n")
    chunks.append(b"data: [DONE]\n\n")
    return chunks


REQUEST_BODY: Final = _request_body()
RESPONSE_BODY: Final = _response_body()
SSE_CHUNKS: Final = _sse_chunks()
SSE_TOTAL: Final = sum(len(c) for c in SSE_CHUNKS)
JSON_HEADERS: Final = {"content-type": "application/json"}

# --------------------------------------------------------------------------------------------
# ASGI apps (imported by the server subprocesses as ``stack:<factory>``; keep imports lazy so
# idle RSS reflects the server, not this script's dependencies)
# --------------------------------------------------------------------------------------------

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_JSON_START: Final[Message] = {
    "type": "http.response.start",
    "status": 200,
    "headers": [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(RESPONSE_BODY)).encode()),
    ],
}
_JSON_BODY: Final[Message] = {"type": "http.response.body", "body": RESPONSE_BODY}
_SSE_START: Final[Message] = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
}


async def _read_body(receive: Receive) -> bytes:
    message = await receive()
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        return body
    parts = [body]
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(parts)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


class JsonEndpoint:
    """Raw ASGI endpoint: drain the request body, return the canned ~600-byte JSON."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await _read_body(receive)
        await send(_JSON_START)
        await send(_JSON_BODY)


class SseEndpoint:
    """Raw ASGI endpoint: drain the request body, stream 10 SSE chunks."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await _read_body(receive)
        await send(_SSE_START)
        for chunk in SSE_CHUNKS:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class RawApp:
    """Minimal raw ASGI app: ``/v1/stream`` streams SSE, every other path returns JSON."""

    def __init__(self) -> None:
        self._json = JsonEndpoint()
        self._sse = SseEndpoint()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if scope["path"] == SSE_PATH:
                await self._sse(scope, receive, send)
            else:
                await self._json(scope, receive, send)
        elif scope["type"] == "lifespan":
            await _lifespan(receive, send)


def raw_app() -> ASGIApp:
    """Factory for the raw ASGI app (upstream, and server case (i))."""
    return RawApp()


def router_app() -> ASGIApp:
    """Factory: the same raw endpoint behind a Starlette Router with a few realistic routes."""
    from starlette.routing import Route, Router  # noqa: PLC0415 - lazy: keep idle RSS honest

    json_endpoint = JsonEndpoint()
    routes = [
        Route("/health", JsonEndpoint(), methods=["GET"]),
        Route("/v1/models", JsonEndpoint(), methods=["GET"]),
        Route("/v1/messages", JsonEndpoint(), methods=["POST"]),
        Route("/v1/responses", JsonEndpoint(), methods=["POST"]),
        Route(SSE_PATH, SseEndpoint(), methods=["POST"]),
        Route(JSON_PATH, json_endpoint, methods=["POST"]),
    ]
    return Router(routes=routes)


class Forwarder(Protocol):
    async def post(self, body: bytes) -> tuple[int, bytes]: ...

    async def aclose(self) -> None: ...


class AiohttpForwarder:
    def __init__(self, url: str, limit: int) -> None:
        import aiohttp  # noqa: PLC0415 - lazy: only the chosen client is loaded

        self._url = url
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=limit),
            timeout=aiohttp.ClientTimeout(total=30),
        )

    async def post(self, body: bytes) -> tuple[int, bytes]:
        async with self._session.post(self._url, data=body, headers=JSON_HEADERS) as resp:
            return resp.status, await resp.read()

    async def aclose(self) -> None:
        await self._session.close()


class HttpxForwarder:
    def __init__(self, url: str, limit: int) -> None:
        import httpx  # noqa: PLC0415 - lazy: only the chosen client is loaded

        self._url = url
        self._client = httpx.AsyncClient(
            http1=True,
            http2=False,
            limits=httpx.Limits(max_connections=limit, max_keepalive_connections=limit),
            timeout=httpx.Timeout(30.0),
            trust_env=False,
        )

    async def post(self, body: bytes) -> tuple[int, bytes]:
        resp = await self._client.post(self._url, content=body, headers=JSON_HEADERS)
        return resp.status_code, resp.content

    async def aclose(self) -> None:
        await self._client.aclose()


def _make_forwarder(client: str, url: str, limit: int) -> Forwarder:
    if client == "aiohttp":
        return AiohttpForwarder(url, limit)
    if client == "httpx":
        return HttpxForwarder(url, limit)
    raise ValueError(f"unknown client {client!r}")


class ProxyApp:
    """Pass-through gateway handler: receive body, forward upstream, return upstream body."""

    def __init__(self, client: str, upstream: str) -> None:
        self._client = client
        self._upstream = upstream
        self._forwarder: Forwarder | None = None

    def _get(self) -> Forwarder:
        # Created inside the running loop; no await between check and set, so no race.
        if self._forwarder is None:
            self._forwarder = _make_forwarder(self._client, self._upstream, 100)
        return self._forwarder

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            body = await _read_body(receive)
            status, payload = await self._get().post(body)
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(payload)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": payload})
        elif scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    self._get()
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    if self._forwarder is not None:
                        await self._forwarder.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return


def proxy_app() -> ASGIApp:
    """Factory for the proxy app; configured by RW_BENCH_CLIENT and RW_BENCH_UPSTREAM."""
    return ProxyApp(os.environ["RW_BENCH_CLIENT"], os.environ["RW_BENCH_UPSTREAM"])


# --------------------------------------------------------------------------------------------
# Load generator / client benchmark (runs in its own subprocess: ``stack.py load ...``)
# --------------------------------------------------------------------------------------------

RequestFn = Callable[[], Awaitable[bool]]


@dataclass
class LoadResult:
    n: int
    errors: int
    p50_us: float
    p99_us: float
    mean_us: float
    rps: float
    truncated: bool = False


def _percentile(sorted_ns: list[int], q: float) -> float:
    """Nearest-rank percentile of sorted nanosecond samples, in microseconds."""
    if not sorted_ns:
        return math.nan
    rank = max(1, math.ceil(q * len(sorted_ns)))
    return sorted_ns[min(rank, len(sorted_ns)) - 1] / 1000.0


async def _drive(
    request: RequestFn, concurrency: int, total: int, deadline_ns: int
) -> tuple[list[int], int, int, bool]:
    """Run ``total`` requests over ``concurrency`` workers; return (latencies, errors, wall)."""
    latencies: list[int] = []
    errors = 0
    truncated = False
    per_worker = [
        total // concurrency + (1 if i < total % concurrency else 0) for i in range(concurrency)
    ]
    clock = time.perf_counter_ns

    async def worker(count: int) -> None:
        nonlocal errors, truncated
        for _ in range(count):
            t0 = clock()
            ok = await request()
            t1 = clock()
            latencies.append(t1 - t0)
            if not ok:
                errors += 1
            if t1 > deadline_ns:
                truncated = True
                return

    start = clock()
    await asyncio.gather(*(worker(c) for c in per_worker))
    return latencies, errors, clock() - start, truncated


def _aiohttp_requester(url: str, mode: str, concurrency: int) -> tuple[RequestFn, Any]:
    import aiohttp  # noqa: PLC0415 - lazy: the load process imports only the client it tests

    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=concurrency),
        timeout=aiohttp.ClientTimeout(total=30),
    )

    async def json_request() -> bool:
        async with session.post(url, data=REQUEST_BODY, headers=JSON_HEADERS) as resp:
            data = await resp.read()
            return resp.status == 200 and len(data) == len(RESPONSE_BODY)

    async def sse_request() -> bool:
        async with session.post(url, data=REQUEST_BODY, headers=JSON_HEADERS) as resp:
            got = 0
            async for chunk in resp.content.iter_any():
                got += len(chunk)
            return resp.status == 200 and got == SSE_TOTAL

    return (sse_request if mode == "sse" else json_request), session.close


def _httpx_requester(url: str, mode: str, concurrency: int) -> tuple[RequestFn, Any]:
    import httpx  # noqa: PLC0415 - lazy: the load process imports only the client it tests

    client = httpx.AsyncClient(
        http1=True,
        http2=False,
        limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        timeout=httpx.Timeout(30.0),
        trust_env=False,
    )

    async def json_request() -> bool:
        resp = await client.post(url, content=REQUEST_BODY, headers=JSON_HEADERS)
        return resp.status_code == 200 and len(resp.content) == len(RESPONSE_BODY)

    async def sse_request() -> bool:
        async with client.stream("POST", url, content=REQUEST_BODY, headers=JSON_HEADERS) as resp:
            got = 0
            async for chunk in resp.aiter_raw():
                got += len(chunk)
            return resp.status_code == 200 and got == SSE_TOTAL

    return (sse_request if mode == "sse" else json_request), client.aclose


async def _load_async(args: argparse.Namespace) -> LoadResult:
    make = _aiohttp_requester if args.client == "aiohttp" else _httpx_requester
    request, close = make(args.url, args.mode, args.concurrency)
    try:
        deadline = time.perf_counter_ns() + int(args.max_seconds * 1e9)
        await _drive(request, args.concurrency, args.warmup, deadline)
        lat, errors, wall, truncated = await _drive(
            request, args.concurrency, args.requests, deadline
        )
    finally:
        await close()
    lat.sort()
    n = len(lat)
    return LoadResult(
        n=n,
        errors=errors,
        p50_us=_percentile(lat, 0.50),
        p99_us=_percentile(lat, 0.99),
        mean_us=(sum(lat) / n / 1000.0) if n else math.nan,
        rps=n / (wall / 1e9) if wall else math.nan,
        truncated=truncated,
    )


async def _dispatch_ns(app: ASGIApp, calls: int) -> float:
    """Mean in-process cost (ns) of one POST through ``app`` with no-op receive/send."""
    scope: Scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": JSON_PATH, "raw_path": JSON_PATH.encode(), "root_path": "",
        "query_string": b"", "headers": [(b"content-type", b"application/json")],
        "client": (HOST, 50000), "server": (HOST, 8000),
    }  # fmt: skip
    request: Message = {"type": "http.request", "body": REQUEST_BODY, "more_body": False}

    async def receive() -> Message:
        return request

    async def send(message: Message) -> None:
        del message

    for _ in range(calls // 10):
        await app(dict(scope), receive, send)
    start = time.perf_counter_ns()
    for _ in range(calls):
        await app(dict(scope), receive, send)
    return (time.perf_counter_ns() - start) / calls


def _dispatch_main(args: argparse.Namespace) -> int:
    import uvloop  # noqa: PLC0415 - lazy: the orchestrator does not need it

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        raw = min(runner.run(_dispatch_ns(raw_app(), args.calls)) for _ in range(3))
        routed = min(runner.run(_dispatch_ns(router_app(), args.calls)) for _ in range(3))
    print(json.dumps({"raw_us": raw / 1000.0, "router_us": routed / 1000.0}))
    return 0


def _load_main(args: argparse.Namespace) -> int:
    import uvloop  # noqa: PLC0415 - lazy: the orchestrator does not need it

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        result = runner.run(_load_async(args))
    print(json.dumps(result.__dict__))
    return 0


# --------------------------------------------------------------------------------------------
# Orchestrator: subprocess management
# --------------------------------------------------------------------------------------------

BENCH_DIR: Final = Path(__file__).resolve().parent
SERVERS: Final = ("uvicorn", "granian")
CLIENTS: Final = ("httpx", "aiohttp")


class Budget:
    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()


def _guard(cmd: list[str], cpus: str | None) -> list[str]:
    """Prefix ``cmd`` so it dies with us (PR_SET_PDEATHSIG) and is optionally CPU-pinned."""
    prefix = ["setpriv", "--pdeathsig", "SIGKILL", "--"]
    if cpus is not None:
        prefix += ["taskset", "-c", cpus]
    return prefix + cmd


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def _http_ok(port: int, path: str) -> bool:
    request = (
        f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(REQUEST_BODY)}\r\nconnection: close\r\n\r\n"
    ).encode() + REQUEST_BODY
    try:
        with socket.create_connection((HOST, port), timeout=2.0) as s:
            s.sendall(request)
            return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def _tree_pids(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    pids, stack = [], [root]
    while stack:
        pid = stack.pop()
        pids.append(pid)
        stack.extend(children.get(pid, []))
    return pids


def _tree_rss_mib(root: int) -> tuple[float, int]:
    total_kib, count = 0, 0
    for pid in _tree_pids(root):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kib += int(line.split()[1])
                    count += 1
        except OSError:
            continue
    return total_kib / 1024.0, count


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    log: IO[bytes]
    rss_mib: float = 0.0
    nprocs: int = 0

    def log_tail(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-2000:]


def _server_cmd(server: str, factory: str, port: int) -> list[str]:
    py = sys.executable
    if server == "uvicorn":
        return [
            py, "-m", "uvicorn", f"stack:{factory}", "--factory",
            "--host", HOST, "--port", str(port), "--loop", "uvloop", "--http", "httptools",
            "--no-access-log", "--log-level", "warning", "--lifespan", "on",
            "--app-dir", str(BENCH_DIR),
        ]  # fmt: skip
    if server == "granian":
        return [
            py, "-m", "granian", "--interface", "asgi", "--host", HOST, "--port", str(port),
            "--workers", "1", "--loop", "uvloop", "--http", "1", "--no-ws",
            "--no-access-log", "--log-level", "warning", "--factory",
            "--working-dir", str(BENCH_DIR), f"stack:{factory}",
        ]  # fmt: skip
    raise ValueError(f"unknown server {server!r}")


@contextlib.contextmanager
def running_server(
    server: str, factory: str, *, cpus: str | None, env: dict[str, str] | None = None
) -> Iterator[Server]:
    port = _free_port()
    child_env = {**os.environ, "PYTHONPATH": str(BENCH_DIR), **(env or {})}
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            _guard(_server_cmd(server, factory, port), cpus),
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=child_env, cwd=BENCH_DIR, start_new_session=True,
        )  # fmt: skip
        srv = Server(proc=proc, port=port, log=log)
        try:
            ready_by = time.monotonic() + 20.0
            while not _http_ok(port, JSON_PATH):
                if proc.poll() is not None or time.monotonic() > ready_by:
                    raise RuntimeError(f"{server}:{factory} failed to start:\n{srv.log_tail()}")
                time.sleep(0.05)
            time.sleep(0.5)  # let start-up allocations settle before sampling idle RSS
            srv.rss_mib, srv.nprocs = _tree_rss_mib(proc.pid)
            yield srv
        finally:
            _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)
    with contextlib.suppress(ProcessLookupError):  # stragglers (granian workers)
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)


@dataclass
class Sizes:
    c1_requests: int
    c16_requests: int
    max_seconds: float


def run_load(
    url: str,
    *,
    client: str,
    mode: str,
    concurrency: int,
    sizes: Sizes,
    budget: Budget,
    cpus: str | None,
) -> LoadResult | None:
    if budget.left() < 3.0:
        print(f"  ! skipped {url} c={concurrency}: time budget exhausted", file=sys.stderr)
        return None
    requests = sizes.c1_requests if concurrency == 1 else sizes.c16_requests
    max_seconds = min(sizes.max_seconds, budget.left() - 2.0)
    cmd = [
        sys.executable, str(Path(__file__).resolve()), "load", "--url", url,
        "--client", client, "--mode", mode, "--concurrency", str(concurrency),
        "--requests", str(requests), "--warmup", str(max(100, requests // 10)),
        "--max-seconds", f"{max_seconds:.1f}",
    ]  # fmt: skip
    proc = subprocess.run(
        _guard(cmd, cpus), capture_output=True, timeout=max_seconds + 15.0, check=False,
        start_new_session=True,
    )  # fmt: skip
    if proc.returncode != 0:
        print(f"  ! load failed ({url}): {proc.stderr.decode()[-1500:]}", file=sys.stderr)
        return None
    return LoadResult(**json.loads(proc.stdout.decode().strip().splitlines()[-1]))


# --------------------------------------------------------------------------------------------
# Orchestrator: the three parts
# --------------------------------------------------------------------------------------------

CONCURRENCIES: Final = (1, 16)


@dataclass
class Ctx:
    sizes: Sizes
    budget: Budget
    pin: bool
    results: dict[str, Any] = field(default_factory=dict)

    @property
    def server_cpus(self) -> str | None:
        return "1" if self.pin else None

    @property
    def other_cpus(self) -> str | None:
        return "0" if self.pin else None


def _fmt(r: LoadResult | None) -> str:
    if r is None:
        return f"{'-':>8} {'-':>8} {'-':>7}"
    flag = "*" if r.errors or r.truncated else " "
    return f"{r.p50_us:8.0f} {r.p99_us:8.0f} {r.rps:7.0f}{flag}"


def _row_header(first: str, width: int) -> str:
    cols = "  ".join(f"{'p50us':>8} {'p99us':>8} {'rps':>7} " for _ in CONCURRENCIES)
    conc = "  ".join(f"{'--- c=' + str(c) + ' ---':^26}" for c in CONCURRENCIES)
    return f"{'':<{width}} {conc}\n{first:<{width}} {cols}"


def part_clients(ctx: Ctx) -> None:
    print("\n[1] upstream HTTP clients -> uvicorn raw upstream (latency per request)")
    table: dict[str, dict[str, Any]] = {}
    with running_server("uvicorn", "raw_app", cpus=ctx.server_cpus) as upstream:
        print(_row_header("client/mode", 14))
        for mode in ("json", "sse"):
            path = SSE_PATH if mode == "sse" else JSON_PATH
            for client in CLIENTS:
                row: dict[str, Any] = {}
                for conc in CONCURRENCIES:
                    row[f"c{conc}"] = run_load(
                        f"http://{HOST}:{upstream.port}{path}", client=client, mode=mode,
                        concurrency=conc, sizes=ctx.sizes, budget=ctx.budget,
                        cpus=ctx.other_cpus,
                    )  # fmt: skip
                table[f"{client}/{mode}"] = row
                print(f"{client + '/' + mode:<14} " + "  ".join(
                    _fmt(row[f"c{c}"]) for c in CONCURRENCIES))  # fmt: skip
    ctx.results["clients"] = table


def part_servers(ctx: Ctx) -> None:
    print("\n[2] ASGI servers, aiohttp load generator (separate process), POST json")
    table: dict[str, dict[str, Any]] = {}
    print(_row_header("server/app", 16) + "  idleRSS(MiB)")
    for server in SERVERS:
        for app, factory in (("raw", "raw_app"), ("router", "router_app")):
            row: dict[str, Any] = {}
            with running_server(server, factory, cpus=ctx.server_cpus) as srv:
                row["rss_mib"], row["nprocs"] = srv.rss_mib, srv.nprocs
                for conc in CONCURRENCIES:
                    row[f"c{conc}"] = run_load(
                        f"http://{HOST}:{srv.port}{JSON_PATH}", client="aiohttp", mode="json",
                        concurrency=conc, sizes=ctx.sizes, budget=ctx.budget,
                        cpus=ctx.other_cpus,
                    )  # fmt: skip
            table[f"{server}/{app}"] = row
            print(f"{server + '/' + app:<16} "
                  + "  ".join(_fmt(row[f"c{c}"]) for c in CONCURRENCIES)
                  + f"  {row['rss_mib']:6.1f} ({row['nprocs']} proc)")  # fmt: skip
    calls = 5000 if ctx.sizes.c1_requests < 3000 else 20000
    cmd = [sys.executable, str(Path(__file__).resolve()), "dispatch", "--calls", str(calls)]
    proc = subprocess.run(
        _guard(cmd, ctx.other_cpus), capture_output=True, timeout=60.0, check=False,
        start_new_session=True,
    )  # fmt: skip
    if proc.returncode == 0:
        dispatch = json.loads(proc.stdout.decode().strip().splitlines()[-1])
        table["dispatch_in_process"] = dispatch
        print(f"in-process dispatch (no server, no I/O): raw app {dispatch['raw_us']:.1f} us, "
              f"Starlette Router {dispatch['router_us']:.1f} us per request")  # fmt: skip
    else:
        print(f"  ! dispatch failed: {proc.stderr.decode()[-1500:]}", file=sys.stderr)
    ctx.results["servers"] = table


def _best(table: dict[str, dict[str, Any]], keys: tuple[str, ...], suffix: str) -> str | None:
    scored = []
    for key in keys:
        row = table.get(f"{key}{suffix}")
        res = row.get("c16") if row else None
        if isinstance(res, LoadResult):
            scored.append((res.p99_us, key))
    return min(scored)[1] if scored else None


def choose_combos(ctx: Ctx) -> list[tuple[str, str]]:
    client = _best(ctx.results.get("clients", {}), CLIENTS, "/json") or "aiohttp"
    server = _best(ctx.results.get("servers", {}), SERVERS, "/raw") or "uvicorn"
    other_client = next(c for c in CLIENTS if c != client)
    other_server = next(s for s in SERVERS if s != server)
    return [(server, client), (other_server, client), (server, other_client)]


def part_proxy(ctx: Ctx, combos: list[tuple[str, str]]) -> None:
    print("\n[3] pass-through proxy (server+client) vs direct upstream, aiohttp load generator")
    table: dict[str, dict[str, Any]] = {}
    with running_server("uvicorn", "raw_app", cpus=ctx.other_cpus) as upstream:
        upstream_url = f"http://{HOST}:{upstream.port}{JSON_PATH}"

        def measure(url: str) -> dict[str, LoadResult | None]:
            return {
                f"c{c}": run_load(url, client="aiohttp", mode="json", concurrency=c,
                                  sizes=ctx.sizes, budget=ctx.budget, cpus=ctx.other_cpus)
                for c in CONCURRENCIES
            }  # fmt: skip

        before = measure(upstream_url)
        for server, client in combos:
            env = {"RW_BENCH_CLIENT": client, "RW_BENCH_UPSTREAM": upstream_url}
            with running_server(server, "proxy_app", cpus=ctx.server_cpus, env=env) as proxy:
                row: dict[str, Any] = measure(f"http://{HOST}:{proxy.port}{JSON_PATH}")
                row["rss_mib"] = proxy.rss_mib
            table[f"{server}+{client}"] = row
        after = measure(upstream_url)
    direct: dict[str, Any] = {"before": before, "after": after}
    print(_row_header("path", 18) + "   added p50/p99 us (c=1 | c=16)")
    for label, res in (("direct (before)", before), ("direct (after)", after)):
        print(f"{label:<18} " + "  ".join(_fmt(res[f"c{c}"]) for c in CONCURRENCIES))
    for combo, row in table.items():
        added = []
        for c in CONCURRENCIES:
            base = [r for r in (before[f"c{c}"], after[f"c{c}"]) if r is not None]
            res = row[f"c{c}"]
            if res is None or not base:
                added.append("-")
                continue
            d50 = res.p50_us - sum(b.p50_us for b in base) / len(base)
            d99 = res.p99_us - sum(b.p99_us for b in base) / len(base)
            added.append(f"{d50:+.0f}/{d99:+.0f}")
            row[f"added_c{c}"] = {"p50_us": d50, "p99_us": d99}
        print(f"{combo:<18} " + "  ".join(_fmt(row[f"c{c}"]) for c in CONCURRENCIES)
              + "   " + " | ".join(added))  # fmt: skip
    ctx.results["proxy"] = {"direct": direct, "combos": table}


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="cmd")
    load = sub.add_parser("load", help="internal: run one load/client measurement")
    load.add_argument("--url", required=True)
    load.add_argument("--client", choices=CLIENTS, default="aiohttp")
    load.add_argument("--mode", choices=("json", "sse"), default="json")
    load.add_argument("--concurrency", type=int, default=1)
    load.add_argument("--requests", type=int, default=2000)
    load.add_argument("--warmup", type=int, default=200)
    load.add_argument("--max-seconds", type=float, default=20.0)
    dispatch = sub.add_parser("dispatch", help="internal: in-process raw vs Router dispatch cost")
    dispatch.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--quick", action="store_true", help="~4x fewer requests per case")
    parser.add_argument(
        "--parts", default="clients,servers,proxy",
        help="comma-separated subset of: clients,servers,proxy",
    )  # fmt: skip
    parser.add_argument(
        "--combos", default="",
        help="proxy combos, e.g. uvicorn+aiohttp,granian+aiohttp (default: chosen from 1+2)",
    )  # fmt: skip
    parser.add_argument(
        "--pin", action="store_true",
        help="pin servers under test to CPU 1 and load generator/upstream to CPU 0",
    )  # fmt: skip
    parser.add_argument("--budget", type=float, default=170.0, help="overall time cap, seconds")
    parser.add_argument("--json-out", type=Path, default=None, help="also write results here")
    return parser.parse_args(argv)


def _jsonable(obj: object) -> object:
    if isinstance(obj, LoadResult):
        return obj.__dict__
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    return obj


def _parse_combos(spec: str) -> list[tuple[str, str]]:
    combos: list[tuple[str, str]] = []
    for item in spec.split(","):
        server, _, client = item.strip().partition("+")
        if server not in SERVERS or client not in CLIENTS:
            raise SystemExit(
                f"bad combo {item!r}; expected <{'|'.join(SERVERS)}>+<{'|'.join(CLIENTS)}>"
            )
        combos.append((server, client))
    return combos


def _on_signal(signum: int, frame: object) -> None:
    del frame
    raise SystemExit(128 + signum)


def main(argv: list[str]) -> int:
    args = _parse(argv)
    if args.cmd == "load":
        return _load_main(args)
    if args.cmd == "dispatch":
        return _dispatch_main(args)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, _on_signal)
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    unknown = parts - {"clients", "servers", "proxy"}
    if unknown:
        raise SystemExit(f"unknown --parts: {sorted(unknown)}")
    sizes = Sizes(800, 4000, 8.0) if args.quick else Sizes(3000, 16000, 20.0)
    ctx = Ctx(sizes=sizes, budget=Budget(args.budget), pin=args.pin)
    print(f"python {sys.version.split()[0]} ({sys.executable}); cpus={os.cpu_count()}; "
          f"pin={args.pin}; quick={args.quick}; requests c1={sizes.c1_requests} "
          f"c16={sizes.c16_requests}; '*' = errors or truncated")  # fmt: skip
    started = time.monotonic()
    if "clients" in parts:
        part_clients(ctx)
    if "servers" in parts:
        part_servers(ctx)
    if "proxy" in parts:
        part_proxy(ctx, _parse_combos(args.combos) if args.combos else choose_combos(ctx))
    print(f"\ntotal {time.monotonic() - started:.0f}s")
    if args.json_out is not None:
        payload = {"python": sys.version, "executable": sys.executable, **ctx.results}
        args.json_out.write_text(json.dumps(_jsonable(payload), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
