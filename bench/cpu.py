"""Gateway CPU time per request: what one core can serve, independent of the machine's load.

Wall-clock throughput on a shared machine moves with everything else running on it; the
CPU time the gateway process itself spends does much less. This starts the simulated
upstreams and `rungway serve` as in `bench/overhead.py`, then for each case sends a fixed
number of requests through the gateway and reads the gateway's CPU time (user plus
system, every thread, from the operating system) before and after:

- OpenAI Chat and Anthropic Messages, each to its own API's upstream (native), and
  Anthropic Messages served by the OpenAI-compatible upstream (translated both ways);
- JSON, and streams of `--chunks` content chunks (20 by default) plus the usage chunk;
- budgets off (unpriced models, nothing held), then on (priced models under rung and
  client-key budgets: every request reserves, is journaled and settles).

CPU per request is the gateway's CPU time over the requests sent, the ledger writer's
share included (the run waits for it to drain); the kernel's share (system time: socket
reads and writes, mostly) is shown on its own. 1 / (CPU per request) is the throughput
one core could give if nothing else ran on it.

Each case runs `--repeat` times and keeps its cheapest run: other work on a shared
machine only adds to a run's CPU time (contention for caches and cores), by up to half
between runs here, so the minimum is the steadiest figure. Judge a change with
`bench/instructions.py`; this figure says what a request costs in time.

    python bench/cpu.py [--requests 2000] [--repeat 3] [--concurrency 16] [--chunks 20]
                        [--quiet] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import uvloop
import yaml

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import overhead  # noqa: E402 - a sibling script, not a package

WARM_UP = 300


def _scenario(folder: Path, name: str, chunks: int) -> Path:
    """The bench scenario `name`, rewritten to stream `chunks` content chunks."""
    scenario = yaml.safe_load((HERE / "scenarios" / name).read_text())
    response = scenario.setdefault("response", {})
    response["output_tokens"] = chunks * int(response.get("chunk_tokens", 4))
    path = folder / name
    path.write_text(yaml.safe_dump(scenario))
    return path


async def _send(url: str, body: bytes, headers: dict[str, str], total: int, width: int) -> int:
    """`total` requests at `width` concurrent, each answer read whole; how many failed.

    A failed answer is counted and shown rather than ending a run that takes minutes; the
    first one is printed, so that it can be looked into."""
    connector = aiohttp.TCPConnector(limit=width)
    failed = 0
    async with aiohttp.ClientSession(connector=connector) as session:
        remaining = total

        async def worker() -> None:
            nonlocal remaining, failed
            while remaining > 0:
                remaining -= 1
                async with session.post(url, data=body, headers=headers) as response:
                    answer = await response.read()
                    if response.status != 200:
                        if not failed:
                            print(f"{url}: HTTP {response.status}: {answer[:300]!r}", flush=True)
                        failed += 1

        await asyncio.gather(*(worker() for _ in range(width)))
    return failed


def _cpu_seconds(process: psutil.Process) -> tuple[float, float]:
    """User and system CPU seconds of `process`, every thread."""
    times = process.cpu_times()
    return float(times.user), float(times.system)


def _measure(
    process: psutil.Process, case: overhead.Case, args: argparse.Namespace
) -> tuple[float, float, float, int]:
    """One timed run of a case: user and system CPU seconds, wall seconds, failures."""
    time.sleep(0.5)
    user_before, system_before = _cpu_seconds(process)
    started = time.perf_counter()
    failed = asyncio.run(
        _send(case.gateway_url, case.body, case.gateway_headers, args.requests, args.concurrency)
    )
    elapsed = time.perf_counter() - started
    # The ledger writer batches rows: count its share of these requests too.
    time.sleep(0.5)
    user_after, system_after = _cpu_seconds(process)
    return user_after - user_before, system_after - system_before, elapsed, failed


def _run_gateway(
    folder: Path, upstreams: dict[str, str], budgets: bool, args: argparse.Namespace
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with overhead._processes() as running:
        port = overhead._free_port()
        config = overhead._gateway_config(folder, upstreams, port, budgets)
        gateway = overhead._spawn(
            ["serve", "--config", str(config), *(["--quiet"] if args.quiet else [])]
        )
        running.append(gateway)
        gateway_url = f"http://127.0.0.1:{port}"
        overhead._wait_http(f"{gateway_url}/healthz", gateway)
        process = psutil.Process(gateway.pid)
        for stream in (False, True):
            for case in overhead._cases(upstreams, gateway_url, stream, budgets, True):
                url, body, headers = case.gateway_url, case.body, case.gateway_headers
                asyncio.run(_send(url, body, headers, WARM_UP, args.concurrency))
                runs = [_measure(process, case, args) for _ in range(args.repeat)]
                # Other work on the machine only ever adds to a run's CPU time (cache and
                # core contention): the cheapest run is the one closest to the gateway's own.
                user, system, elapsed, _ = min(runs, key=lambda run: run[0] + run[1])
                cpu = user + system
                row = {
                    "api": case.name,
                    "stream": stream,
                    "budgets": budgets,
                    "requests": args.requests,
                    "repeat": args.repeat,
                    "cpu_ms_per_request": cpu * 1000 / args.requests,
                    "system_ms_per_request": system * 1000 / args.requests,
                    "one_core_rps": args.requests / cpu if cpu else None,
                    "wall_rps": args.requests / elapsed,
                    "failed": sum(run[3] for run in runs),
                }
                rows.append(row)
                print(_format(row), flush=True)
    return rows


def _format(row: dict[str, Any]) -> str:
    mode = "stream" if row["stream"] else "json"
    return (
        f"| {row['api']} | {mode} | {'on' if row['budgets'] else 'off'} "
        f"| {row['cpu_ms_per_request']:.3f} | {row['system_ms_per_request']:.3f} "
        f"| {row['one_core_rps']:,.0f} "
        f"| {row['wall_rps']:,.0f} | {row['failed']} |"
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every case with budgets off, then on; return the figures."""
    rows: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="rungway-cpu-") as tmp,
        overhead._processes() as running,
    ):
        folder = Path(tmp)
        upstreams = overhead._start_upstreams(
            running, lambda api: _scenario(folder, api.scenario, args.chunks)
        )
        for budgets in (False, True):
            gateway_folder = folder / ("budgets" if budgets else "plain")
            gateway_folder.mkdir()
            rows.extend(_run_gateway(gateway_folder, upstreams, budgets, args))
    return {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "executable": sys.executable,
        "concurrency": args.concurrency,
        "chunks": args.chunks,
        "repeat": args.repeat,
        "access_lines": not args.quiet,
        "rows": rows,
    }


def main() -> None:
    """Parse arguments, run, print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=2000, help="requests counted per case")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight")
    parser.add_argument("--chunks", type=int, default=20, help="content chunks per stream")
    parser.add_argument(
        "--repeat", type=int, default=3, help="timed runs per case; the cheapest is kept"
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="serve with --quiet: no access line per request (the default writes them)",
    )
    parser.add_argument("--json-out", type=Path, help="also write the figures as JSON")
    args = parser.parse_args()
    uvloop.install()
    print(
        f"python: {sys.executable} ({platform.python_version()}); {args.requests} requests "
        f"per run at concurrency {args.concurrency}, best of {args.repeat}; "
        f"streams of {args.chunks} chunks"
    )
    print(
        "| api | mode | budgets | CPU ms / request | of which system | one core, requests/s "
        "| wall requests/s | failed |"
    )
    print("|---|---|---|---|---|---|---|---|")
    results = run(args)
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
