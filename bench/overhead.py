"""Gateway overhead: the same requests sent straight to a simulated upstream and through
the gateway, in one run.

Reports, for OpenAI Chat Completions and Anthropic Messages, streaming and not, at
concurrency 1, 16 and 64: latency p50/p99 direct and through the gateway, the added
latency, and requests per second; plus the gateway's idle and loaded RSS and its cold
start time (process start to the first `/healthz` answer).

The upstreams and the gateway run as separate processes (`rungway sim-upstream`,
`rungway serve`). The load comes from `wrk` when it is installed (`apt-get install wrk`):
a load generator written in C leaves the two cores to the processes under test, where a
Python one would take one of them and inflate every tail latency. Without wrk, an aiohttp
client in this process stands in (`--load aiohttp`). Direct runs are measured before and
after each gateway run and averaged, so drift in the machine's load does not land on the
gateway. Everything is on 127.0.0.1 and every case is bounded in requests and seconds.

With `--budgets`, the gateway serves priced models on the cheap rung under rung and
client-key budgets, so every request reserves its ceiling (written to the journal before
it is sent) and settles it; without, the models have no price and nothing is held.

With `--translated`, Anthropic Messages requests are also sent for the model the
OpenAI-compatible upstream serves, so the gateway translates each one both ways.

With `--pool`, the OpenAI-compatible upstream is served by two connections of one
provider (a pool) and Chat requests for `auto` are also sent, each a conversation of its
own: the ladder, the pool's order and the session pin are on the path.

With `--quiet`, the gateway writes no access line per request; by default it writes them
to a file, as `rungway serve` does to its stderr.

    python bench/overhead.py [--quick] [--budgets] [--translated] [--pool] [--quiet]
                             [--load wrk|aiohttp] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

import aiohttp
import psutil
import uvloop
import yaml

HERE = Path(__file__).parent
LEVELS = (1, 16, 64)
BENCH_CLIENT_KEY = "rk-bench-client"


@dataclass(frozen=True)
class Api:
    """One wire API under test."""

    name: str
    scenario: str
    provider: str
    auth: str
    model: str
    path: str
    token: str
    headers: dict[str, str]
    upstream_prefix: str
    priced: tuple[str, str]
    """A provider and model with a list price, for runs with budgets: the cheap rung."""

    def body(self, stream: bool, budgets: bool) -> bytes:
        """A small, realistic request body."""
        payload: dict[str, Any] = {
            "model": self.priced[1] if budgets else self.model,
            "messages": [{"role": "user", "content": "Say hello in five words, please."}],
            "max_tokens": 64,
            "stream": stream,
        }
        return json.dumps(payload).encode()


APIS = (
    Api(
        "openai-chat",
        "openai-fast.yaml",
        "openai-compatible",
        "apikey",
        "bench-chat",
        "/v1/chat/completions",
        "sk-bench-openai",
        {},
        "/v1",
        ("openai", "gpt-4.1-mini"),
    ),
    Api(
        "anthropic-messages",
        "anthropic-fast.yaml",
        "anthropic-compatible",
        "apikey",
        "bench-claude",
        "/v1/messages",
        "sk-ant-bench",
        {"anthropic-version": "2023-06-01"},
        "",
        ("anthropic", "claude-haiku-4-5"),
    ),
)


@dataclass
class Sample:
    """Latencies of one case, in microseconds, and its throughput."""

    p50_us: float
    p99_us: float
    rps: float
    count: int


@dataclass
class Row:
    """Direct against gateway for one (api, mode, concurrency)."""

    api: str
    stream: bool
    concurrency: int
    direct: Sample
    gateway: Sample

    @property
    def added_p50_us(self) -> float:
        return self.gateway.p50_us - self.direct.p50_us

    @property
    def added_p99_us(self) -> float:
        return self.gateway.p99_us - self.direct.p99_us


# Each process's stderr goes to a file of its own: the gateway writes an access line per
# request (as `rungway serve` does by default), which would fill an unread pipe.
_STDERR: dict[int, IO[bytes]] = {}


def _spawn(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    log = tempfile.TemporaryFile()  # noqa: SIM115 - open for as long as the process runs
    process = subprocess.Popen(
        [sys.executable, "-m", "rungway", *args],
        stdout=subprocess.DEVNULL,
        stderr=log,
        env={**os.environ, **(env or {})},
    )
    _STDERR[process.pid] = log
    return process


def _wait_http(url: str, process: subprocess.Popen[bytes], deadline_s: float = 30) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < deadline_s:
        if process.poll() is not None:
            log = _STDERR[process.pid]
            log.seek(0)
            raise RuntimeError(f"process exited early: {log.read().decode()}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return time.perf_counter() - started
        except OSError:
            time.sleep(0.005)
    raise RuntimeError(f"{url} did not answer within {deadline_s}s")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    running: list[subprocess.Popen[bytes]] = []
    try:
        yield running
    finally:
        for process in running:
            process.terminate()
        for process in running:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def _gateway_config(
    folder: Path, upstreams: dict[str, str], port: int, budgets: bool, pool: bool = False
) -> Path:
    connections = []
    for api in APIS:
        secret = folder / f"{api.name}.secret"
        secret.write_text(api.token)
        provider, model = api.priced if budgets else (api.provider, api.model)
        connections.append(
            {
                "id": api.name,
                "provider": provider,
                "auth": api.auth,
                "credential": {"file": str(secret)},
                "base_url": upstreams[api.name] + api.upstream_prefix,
                "models": [model],
            }
        )
    if pool:
        # A second account of the OpenAI-compatible upstream: the two form one pool.
        connections.append({**connections[0], "id": f"{connections[0]['id']}-2"})
    config: dict[str, Any] = {
        "server": {"host": "127.0.0.1", "port": port},
        "ledger": {"path": str(folder / "ledger.sqlite3")},
        "connections": connections,
    }
    # Without `--budgets` the paid rungs have no limit (the defaults would close premium).
    config["ladder"] = {"rung_budget_usd": {"cheap": None, "premium": None}}
    if budgets:
        # Budgets too large to run out, so every request holds, settles and is journaled.
        (folder / "client.secret").write_text(BENCH_CLIENT_KEY)
        config["ladder"] = {"rung_budget_usd": {"cheap": 1e6, "premium": 1e6}}
        config["client_keys"] = [
            {"name": "bench", "key": {"file": str(folder / "client.secret")}, "budget_usd": 1e6}
        ]
    path = folder / "rungway.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _start_upstreams(
    running: list[subprocess.Popen[bytes]],
    scenario: Callable[[Api], Path] = lambda api: HERE / "scenarios" / api.scenario,
) -> dict[str, str]:
    """One simulated upstream per API, each serving `scenario(api)`, added to `running`
    and answering; their base URLs by API name."""
    upstreams: dict[str, str] = {}
    for api in APIS:
        port = _free_port()
        process = _spawn(["sim-upstream", "--scenario", str(scenario(api)), "--port", str(port)])
        running.append(process)
        upstreams[api.name] = f"http://127.0.0.1:{port}"
        _wait_http(f"{upstreams[api.name]}/_sim/state", process)
    return upstreams


@dataclass(frozen=True)
class Load:
    """How hard to push one case: concurrency, a request budget and a time budget."""

    stream: bool
    concurrency: int
    total: int
    max_s: float


async def _load(url: str, body: bytes, headers: dict[str, str], load: Load) -> Sample:
    latencies: list[int] = []
    stream, concurrency, total = load.stream, load.concurrency, load.total
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one() -> int:
            started = time.perf_counter_ns()
            async with session.post(url, data=body, headers=headers) as response:
                if stream:
                    async for _ in response.content.iter_any():
                        pass
                else:
                    await response.read()
                if response.status != 200:
                    raise RuntimeError(f"{url}: HTTP {response.status}")
            return time.perf_counter_ns() - started

        for _ in range(min(200, total)):
            await one()
        deadline = time.perf_counter() + load.max_s
        remaining = total

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0 and time.perf_counter() < deadline:
                remaining -= 1
                latencies.append(await one())

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    return Sample(
        p50_us=latencies[len(latencies) // 2] / 1000,
        p99_us=latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] / 1000,
        rps=len(latencies) / elapsed,
        count=len(latencies),
    )


_WRK_SCRIPT = """
wrk.method = "POST"
wrk.body = io.open(os.getenv("RUNGWAY_BENCH_BODY"), "rb"):read()
wrk.headers["content-type"] = "application/json"
for pair in string.gmatch(os.getenv("RUNGWAY_BENCH_HEADERS") or "", "[^;]+") do
  local name, value = pair:match("([^=]+)=(.*)")
  wrk.headers[name] = value
end
"""
_WRK_LATENCY = re.compile(r"^\s+(50|99)(?:\.000)?%\s+([\d.]+)(us|ms|s)\s*$", re.MULTILINE)
_WRK_UNITS = {"us": 1.0, "ms": 1000.0, "s": 1_000_000.0}


def _wrk(url: str, body: bytes, headers: dict[str, str], load: Load, folder: Path) -> Sample:
    body_file = folder / "body.json"
    body_file.write_bytes(body)
    script = folder / "post.lua"
    script.write_text(_WRK_SCRIPT)
    extra = ";".join(f"{k}={v}" for k, v in headers.items() if k != "content-type")
    env = {**os.environ, "RUNGWAY_BENCH_BODY": str(body_file), "RUNGWAY_BENCH_HEADERS": extra}
    seconds = max(1, round(load.max_s / 2))
    command = ["wrk", "-t1", f"-c{load.concurrency}", f"-d{seconds}s", "--latency"]
    warm = [*command[:3], "-d1s", "-s", str(script), url]
    subprocess.run(warm, env=env, capture_output=True, check=True)
    done = subprocess.run(
        [*command, "-s", str(script), url], env=env, capture_output=True, text=True, check=True
    )
    if "Non-2xx" in done.stdout or "Socket errors" in done.stdout:
        raise RuntimeError(f"{url}: wrk saw failed requests:\n{done.stdout}")
    found = {p: float(v) * _WRK_UNITS[u] for p, v, u in _WRK_LATENCY.findall(done.stdout)}
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", done.stdout).group(1))  # type: ignore[union-attr]
    count = int(re.search(r"(\d+) requests in", done.stdout).group(1))  # type: ignore[union-attr]
    return Sample(p50_us=found["50"], p99_us=found["99"], rps=rps, count=count)


def _average(a: Sample, b: Sample) -> Sample:
    return Sample(
        (a.p50_us + b.p50_us) / 2, (a.p99_us + b.p99_us) / 2, (a.rps + b.rps) / 2, a.count + b.count
    )


class _RssSampler:
    """Samples a process's RSS in the background and keeps the peak."""

    def __init__(self, pid: int) -> None:
        self._process = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, self._process.memory_info().rss)


def _cold_start(config: Path, port: int, tries: int) -> float:
    times = []
    for _ in range(tries):
        with _processes() as running:
            process = _spawn(["serve", "--config", str(config), "--port", str(port)])
            running.append(process)
            times.append(_wait_http(f"http://127.0.0.1:{port}/healthz", process))
    return statistics.median(times)


@dataclass(frozen=True)
class Case:
    """One row's requests: the same body straight to an upstream and through the gateway."""

    name: str
    body: bytes
    direct_url: str
    direct_headers: dict[str, str]
    gateway_url: str
    gateway_headers: dict[str, str]
    gateway_body: bytes | None = None
    """What the gateway is sent when it differs from the direct body (an `auto` model)."""

    @property
    def through_body(self) -> bytes:
        """The body sent through the gateway."""
        return self.body if self.gateway_body is None else self.gateway_body


def _measure(case: Case, load: Load, load_tool: str, folder: Path) -> Row:
    """Direct before, through the gateway, direct after; the direct runs are averaged."""

    def one(url: str, body: bytes, headers: dict[str, str]) -> Sample:
        if load_tool == "wrk":
            return _wrk(url, body, headers, load, folder)
        return asyncio.run(_load(url, body, headers, load))

    before = one(case.direct_url, case.body, case.direct_headers)
    through = one(case.gateway_url, case.through_body, case.gateway_headers)
    after = one(case.direct_url, case.body, case.direct_headers)
    return Row(case.name, load.stream, load.concurrency, _average(before, after), through)


def _cases(
    upstreams: dict[str, str],
    gateway_url: str,
    stream: bool,
    budgets: bool,
    translated: bool,
    *,
    pool: bool = False,
) -> list[Case]:
    cases = []
    client_key = {"x-api-key": BENCH_CLIENT_KEY} if budgets else {}
    for api in APIS:
        auth = (
            {"authorization": f"Bearer {api.token}"}
            if api.name == "openai-chat"
            else {"x-api-key": api.token}
        )
        cases.append(
            Case(
                api.name,
                api.body(stream, budgets),
                upstreams[api.name] + api.path,
                {"content-type": "application/json", **api.headers, **auth},
                gateway_url + api.path,
                {"content-type": "application/json", **api.headers, **client_key},
            )
        )
    if translated:
        # An Anthropic client served by the OpenAI-compatible upstream: the gateway
        # translates both ways. Added latency is against that upstream, direct.
        chat, messages = APIS
        cases.append(
            Case(
                "anthropic→openai-chat",
                chat.body(stream, budgets),
                upstreams[chat.name] + chat.path,
                {"content-type": "application/json", "authorization": f"Bearer {chat.token}"},
                gateway_url + messages.path,
                {"content-type": "application/json", **messages.headers, **client_key},
            )
        )
    if pool:
        # The ladder over a pool of two connections; one conversation (its first message
        # names the session when no client says one).
        chat = APIS[0]
        auto = json.loads(chat.body(stream, budgets))
        auto["model"] = "auto"
        cases.append(
            Case(
                "openai-chat auto pool",
                chat.body(stream, budgets),
                upstreams[chat.name] + chat.path,
                {"content-type": "application/json", "authorization": f"Bearer {chat.token}"},
                gateway_url + chat.path,
                {"content-type": "application/json", **client_key},
                json.dumps(auto).encode(),
            )
        )
    return cases


def run(
    quick: bool,
    load_tool: str,
    budgets: bool,
    translated: bool,
    *,
    quiet: bool = False,
    pool: bool = False,
) -> dict[str, Any]:
    """Run every case and return the results."""
    totals = {1: 1500, 16: 6000, 64: 6000} if not quick else {1: 400, 16: 1500, 64: 1500}
    max_s = 8.0 if not quick else 3.0
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="rungway-bench-") as tmp, _processes() as running:
        folder = Path(tmp)
        upstreams = _start_upstreams(running)
        gateway_port = _free_port()
        config = _gateway_config(folder, upstreams, gateway_port, budgets, pool)
        gateway = _spawn(["serve", "--config", str(config), *(["--quiet"] if quiet else [])])
        running.append(gateway)
        gateway_url = f"http://127.0.0.1:{gateway_port}"
        _wait_http(f"{gateway_url}/healthz", gateway)
        time.sleep(0.5)
        idle_rss = psutil.Process(gateway.pid).memory_info().rss
        with _RssSampler(gateway.pid) as sampler:
            by_name: dict[str, list[tuple[bool, Case]]] = {}
            for stream in (False, True):
                for case in _cases(upstreams, gateway_url, stream, budgets, translated, pool=pool):
                    by_name.setdefault(case.name, []).append((stream, case))
            for cases in by_name.values():
                for stream, case in cases:
                    for level in LEVELS:
                        load = Load(stream, level, totals[level], max_s)
                        row = _measure(case, load, load_tool, folder)
                        rows.append(row)
                        print(_format_row(row), flush=True)
        loaded_rss = sampler.peak
        gateway.terminate()
        gateway.wait(timeout=10)
        cold = _cold_start(config, _free_port(), 3 if not quick else 1)
    return {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "executable": sys.executable,
        "load": load_tool,
        "budgets": budgets,
        "translated": translated,
        "access_lines": not quiet,
        "rows": [
            {**asdict(row), "added_p50_us": row.added_p50_us, "added_p99_us": row.added_p99_us}
            for row in rows
        ],
        "idle_rss_mb": idle_rss / 2**20,
        "loaded_rss_mb": loaded_rss / 2**20,
        "cold_start_s": cold,
    }


def _format_row(row: Row) -> str:
    mode = "stream" if row.stream else "json"
    return (
        f"| {row.api} | {mode} | {row.concurrency} "
        f"| {row.direct.p50_us:.0f} / {row.direct.p99_us:.0f} "
        f"| {row.gateway.p50_us:.0f} / {row.gateway.p99_us:.0f} "
        f"| {row.added_p50_us:+.0f} / {row.added_p99_us:+.0f} "
        f"| {row.direct.rps:.0f} | {row.gateway.rps:.0f} |"
    )


def main() -> None:
    """Parse arguments, run, print a markdown report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer requests per case")
    parser.add_argument("--json-out", type=Path, help="also write the results as JSON")
    parser.add_argument(
        "--load",
        choices=("wrk", "aiohttp"),
        default="wrk" if shutil.which("wrk") else "aiohttp",
        help="load generator (default: wrk when installed)",
    )
    parser.add_argument(
        "--budgets",
        action="store_true",
        help="priced models on the cheap rung, with rung and client-key budgets",
    )
    parser.add_argument(
        "--translated",
        action="store_true",
        help="also send Anthropic Messages requests that an OpenAI-compatible upstream serves",
    )
    parser.add_argument(
        "--pool",
        action="store_true",
        help="two connections of one provider, and Chat requests for `auto` over them",
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="serve with --quiet: no access line per request (the default writes them)",
    )
    args = parser.parse_args()
    uvloop.install()
    print(
        f"python: {sys.executable} ({platform.python_version()}); load: {args.load}; "
        f"budgets: {'on' if args.budgets else 'off'}"
    )
    print(
        "| api | mode | concurrency | direct p50 / p99 µs | gateway p50 / p99 µs "
        "| added p50 / p99 µs | direct rps | gateway rps |"
    )
    print("|---|---|---|---|---|---|---|---|")
    results = run(
        args.quick, args.load, args.budgets, args.translated, quiet=args.quiet, pool=args.pool
    )
    print(
        f"\ngateway RSS idle {results['idle_rss_mb']:.1f} MB, "
        f"loaded {results['loaded_rss_mb']:.1f} MB; cold start {results['cold_start_s']:.2f} s"
    )
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
