"""Machine instructions the gateway executes per request, counted by callgrind.

Wall-clock figures swing by tens of percent on a shared two-core machine; instruction
counts do not. This runs `rungway serve` under valgrind's callgrind tool, in front of the
same simulated upstreams and config as `bench/overhead.py`, and for each case (OpenAI Chat
and Anthropic Messages, JSON and stream, plus a translated case with `--translated`):

1. sends warm-up requests, then zeroes the counters (`callgrind_control -z`);
2. sends `--requests` requests one at a time over one kept-alive connection;
3. waits for the ledger writer to catch up and dumps the counters (`callgrind_control -d`).

Instructions per request is the dump's total over the requests sent: everything the
gateway process ran for them, every thread (ledger writer included), server and upstream
client included. Only the gateway runs under valgrind; the upstreams and the client run
natively. Counts are stable to well under 1% from run to run, so they judge a change where
timings cannot; they do not weigh cache misses or system calls.

    python bench/instructions.py [--requests 300] [--budgets] [--translated] [--pool]
                                 [--access-lines] [--json-out FILE]

The gateway serves with `--quiet` unless `--access-lines` is given: an access line per
request is `serve`'s default, and its writer thread's share is counted then too.

Needs valgrind (`apt-get install valgrind`). A run takes a few minutes: startup alone
executes several billion instructions under the simulator.
"""

from __future__ import annotations

import argparse
import http.client
import json
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import overhead  # noqa: E402 - a sibling script, not a package

_TOTALS = re.compile(rb"^(?:summary|totals):\s+(\d+)", re.MULTILINE)


def _send(url: str, body: bytes, headers: dict[str, str], count: int) -> None:
    """`count` requests, one at a time, on one kept-alive connection; each read whole."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    try:
        for _ in range(count):
            connection.request("POST", parts.path, body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"{url} answered {response.status}")
    finally:
        connection.close()


def _control(flag: str, pid: int) -> None:
    subprocess.run(["callgrind_control", flag, str(pid)], check=True, capture_output=True)


def _dumped_instructions(folder: Path, before: set[Path]) -> int:
    """The instruction total of the dump written since `before` was listed."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        fresh = [path for path in folder.glob("callgrind.out*") if path not in before]
        for path in fresh:
            match = _TOTALS.search(path.read_bytes())
            if match:
                return int(match.group(1))
        time.sleep(0.2)
    raise RuntimeError("callgrind wrote no dump")


def run(
    requests: int,
    budgets: bool,
    translated: bool,
    *,
    access_lines: bool = False,
    pool: bool = False,
) -> dict[str, object]:
    """Count instructions per request for every case; return the figures."""
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="rungway-instr-") as tmp,
        overhead._processes() as running,
    ):
        folder = Path(tmp)
        upstreams = overhead._start_upstreams(running)
        port = overhead._free_port()
        config = overhead._gateway_config(folder, upstreams, port, budgets, pool)
        gateway = subprocess.Popen(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={folder}/callgrind.out.%p",
                sys.executable,
                "-m",
                "rungway",
                "serve",
                "--config",
                str(config),
                *([] if access_lines else ["--quiet"]),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=folder,
        )
        running.append(gateway)
        gateway_url = f"http://127.0.0.1:{port}"
        overhead._wait_http(f"{gateway_url}/healthz", gateway, deadline_s=600)
        for stream in (False, True):
            cases = overhead._cases(upstreams, gateway_url, stream, budgets, translated, pool=pool)
            for case in cases:
                _send(case.gateway_url, case.through_body, case.gateway_headers, 30)
                time.sleep(1.0)
                _control("-z", gateway.pid)
                _send(case.gateway_url, case.through_body, case.gateway_headers, requests)
                # The ledger writer batches rows: let it write this case's before the dump.
                time.sleep(1.0)
                before = set(folder.glob("callgrind.out*"))
                _control("-d", gateway.pid)
                total = _dumped_instructions(folder, before)
                row = {
                    "api": case.name,
                    "stream": stream,
                    "requests": requests,
                    "instructions_per_request": total // requests,
                }
                rows.append(row)
                mode = "stream" if stream else "json"
                print(f"| {case.name} | {mode} | {total // requests:,} |", flush=True)
    return {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "executable": sys.executable,
        "budgets": budgets,
        "translated": translated,
        "access_lines": access_lines,
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="requests counted per case")
    parser.add_argument("--budgets", action="store_true", help="priced models under budgets")
    parser.add_argument("--translated", action="store_true", help="add a translated case")
    parser.add_argument(
        "--pool", action="store_true", help="add `auto` requests over a pool of two connections"
    )
    parser.add_argument(
        "--access-lines",
        action="store_true",
        help="serve as `serve` does by default, an access line per request (default: --quiet)",
    )
    parser.add_argument("--json-out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        sys.exit("valgrind is not installed: apt-get install valgrind")
    print(f"python: {sys.executable} ({platform.python_version()})")
    print("| api | mode | instructions per request |")
    print("|---|---|---|")
    result = run(
        args.requests, args.budgets, args.translated, access_lines=args.access_lines, pool=args.pool
    )
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
