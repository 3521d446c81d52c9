"""Shared state: what the Redis store costs, and what a second worker brings.

Two parts, each run against real processes on 127.0.0.1 (a simulated OpenAI-compatible
upstream, `rungway serve`, the local Redis), budgets on, so every request holds its
ceiling against the cheap rung's budget and a client key's, and settles it:

The upstream is `rungway sim-upstream --canned`: one answer the simulated upstream
really gave, replayed at almost no cost, so the cores go to the gateway.

1. **Redis store against embedded**, one worker each, at concurrency 1 and 16: latency
   p50/p99 and requests per second. With Redis every hold is one script round trip on the
   request path; the settle is pipelined after the answer.
2. **`--workers 2` against `--workers 1`**, both on Redis, at concurrency 16 and 64:
   requests per second, and the ratio.

The load comes from `wrk` (`apt-get install wrk`); each case is run twice, alternating,
and the better run of each is kept, so a burst of other load on the machine does not land
on one side only.

    python bench/cluster.py [--quick] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import secrets
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis
import yaml

from overhead import (
    APIS,
    BENCH_CLIENT_KEY,
    HERE,
    Load,
    Sample,
    _free_port,
    _gateway_config,
    _processes,
    _spawn,
    _wait_http,
    _wrk,
)

REDIS_URL = "redis://127.0.0.1:6379/0"


def _config(folder: Path, upstream: str, port: int, store: str, prefix: str) -> Path:
    path = _gateway_config(folder, {api.name: upstream for api in APIS}, port, budgets=True)
    config: dict[str, Any] = yaml.safe_load(path.read_text())
    # Only the OpenAI-compatible connection: one upstream process, one less on the cores.
    config["connections"] = [config["connections"][0]]
    config["ledger"] = {"path": str(folder / f"{store}.sqlite3")}
    if store == "redis":
        config["state"] = {"store": "redis", "redis": {"url": REDIS_URL, "prefix": prefix}}
    path.write_text(yaml.safe_dump(config))
    return path


def _gateway(config: Path, port: int, workers: int, running: list[Any]) -> str:
    process = _spawn(["serve", "--config", str(config), "--quiet", "--workers", str(workers)])
    running.append(process)
    url = f"http://127.0.0.1:{port}"
    _wait_http(f"{url}/healthz", process)
    return url


def _stop(running: list[Any]) -> None:
    process = running.pop()
    process.terminate()
    process.wait(timeout=20)


def _wait_http_any(url: str, process: Any) -> None:
    # The canned upstream has no control API: any answer on the port will do.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, "the canned upstream exited"
        try:
            with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer")


def _best(samples: list[Sample]) -> Sample:
    return min(samples, key=lambda sample: sample.p50_us)


def run(quick: bool) -> dict[str, Any]:
    """Run both parts and return their figures."""
    chat = APIS[0]
    body = chat.body(stream=False, budgets=True)
    headers = {"content-type": "application/json", "x-api-key": BENCH_CLIENT_KEY}
    max_s = 3.0 if quick else 8.0
    prefix = f"rwbench-{secrets.token_hex(4)}"
    results: dict[str, Any] = {"stores": [], "workers": []}
    with tempfile.TemporaryDirectory(prefix="rungway-bench-") as tmp, _processes() as running:
        folder = Path(tmp)
        port = _free_port()
        upstream_process = _spawn(
            [
                *("sim-upstream", "--scenario", str(HERE / "scenarios" / chat.scenario)),
                *("--port", str(port), "--canned"),
            ]
        )
        running.append(upstream_process)
        upstream = f"http://127.0.0.1:{port}"
        _wait_http_any(upstream, upstream_process)

        def measure(store: str, workers: int, concurrency: int) -> Sample:
            gateway_port = _free_port()
            config = _config(folder, upstream, gateway_port, store, prefix)
            url = _gateway(config, gateway_port, workers, running)
            try:
                load = Load(False, concurrency, 10**9, max_s)
                return _wrk(url + chat.path, body, headers, load, folder)
            finally:
                _stop(running)

        for concurrency in (1, 16):
            by_store: dict[str, list[Sample]] = {"embedded": [], "redis": []}
            for _ in range(2):
                for store, samples in by_store.items():
                    samples.append(measure(store, 1, concurrency))
            embedded, shared = _best(by_store["embedded"]), _best(by_store["redis"])
            results["stores"].append(
                {"concurrency": concurrency, "embedded": vars(embedded), "redis": vars(shared)}
            )
            print(
                f"| {concurrency} | {embedded.p50_us:.0f} / {embedded.p99_us:.0f} "
                f"| {shared.p50_us:.0f} / {shared.p99_us:.0f} "
                f"| {shared.p50_us - embedded.p50_us:+.0f} "
                f"| {embedded.rps:.0f} | {shared.rps:.0f} |",
                flush=True,
            )
        print("\n| concurrency | 1 worker rps | 2 workers rps | ratio |\n|---|---|---|---|")
        for concurrency in (16, 64):
            by_workers: dict[int, list[Sample]] = {1: [], 2: []}
            for _ in range(2):
                for workers, samples in by_workers.items():
                    samples.append(measure("redis", workers, concurrency))
            one = max(by_workers[1], key=lambda sample: sample.rps)
            two = max(by_workers[2], key=lambda sample: sample.rps)
            results["workers"].append(
                {"concurrency": concurrency, "one": vars(one), "two": vars(two)}
            )
            print(
                f"| {concurrency} | {one.rps:.0f} | {two.rps:.0f} | {two.rps / one.rps:.2f} |",
                flush=True,
            )
    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=f"{prefix}:*"))
    if keys:
        client.delete(*keys)
    client.close()
    return results


def main() -> None:
    """Parse arguments, run, print markdown tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    parser.add_argument("--json-out", type=Path, help="also write the results as JSON")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        sys.exit("bench/cluster.py needs wrk: apt-get install wrk")
    print(f"python: {sys.executable} ({platform.python_version()}); budgets on\n")
    print(
        "| concurrency | embedded p50 / p99 µs | redis p50 / p99 µs | redis adds p50 µs "
        "| embedded rps | redis rps |\n|---|---|---|---|---|---|"
    )
    results = run(args.quick)
    results["python"] = f"{platform.python_implementation()} {platform.python_version()}"
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
