"""`rungway serve --workers N`: several processes on one port, sharing state through Redis."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from rungway.budget import HeldFor, Reservation
from rungway.cli.workers import recover_journals
from rungway.ledger.sqlite import SqliteLedger, read_rows
from rungway.routing.rungs import Rung
from rungway.sim import SimUpstream, builtin_scenario, load_scenario
from tests.services import REDIS_URL


@pytest.fixture(scope="module")
def cheap() -> Iterator[SimUpstream]:
    with SimUpstream(load_scenario(builtin_scenario("cheap-openai"))) as sim:
        yield sim


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _config(folder: Path, upstream: str, port: int, state: str) -> Path:
    secret = folder / "cheap.secret"
    secret.write_text("sk-sim-cheap")
    config = folder / "rungway.yaml"
    config.write_text(
        f"server: {{port: {port}}}\n"
        f"ledger: {{path: {folder / 'ledger.sqlite3'}}}\n"
        f"{state}\n"
        "ladder: {rung_budget_usd: {cheap: 2.5, premium: 0}}\n"
        "connections:\n"
        f"  - {{id: cheap, provider: deepseek, auth: apikey, base_url: '{upstream}/v1',\n"
        f"      credential: {{file: {secret}}}, models: [deepseek-chat]}}\n"
    )
    return config


def _serve(config: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "rungway", "serve", "--config", str(config), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _ready(url: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while True:
        assert process.poll() is None, process.communicate()[1]
        try:
            if httpx.get(f"{url}/healthz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the gateway did not start"
        time.sleep(0.05)


def _chat(url: str) -> httpx.Response:
    body = {"model": "deepseek-chat", "messages": [{"role": "user", "content": "hi"}]}
    return httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30)


def _workers(process: subprocess.Popen[str], count: int) -> list[psutil.Process]:
    deadline = time.monotonic() + 20
    while True:
        children = psutil.Process(process.pid).children()
        if len(children) == count:
            return children
        assert time.monotonic() < deadline, f"{len(children)} workers, not {count}"
        time.sleep(0.05)


def test_more_than_one_worker_needs_a_shared_store(tmp_path: Path, cheap: SimUpstream) -> None:
    config = _config(tmp_path, cheap.url, _port(), "")
    process = _serve(config, "--workers", "2")
    _, err = process.communicate(timeout=30)
    assert process.returncode == 2
    assert "--workers 2 needs a shared store" in err
    assert "store: redis" in " ".join(err.split())
    # Refused before anything was written.
    assert not (tmp_path / "ledger.sqlite3").exists()


@pytest.mark.slow
def test_workers_share_one_port_and_a_dead_one_is_started_again(
    tmp_path: Path, cheap: SimUpstream, redis_prefix: str
) -> None:
    port = _port()
    state = f"state: {{store: redis, redis: {{url: '{REDIS_URL}', prefix: {redis_prefix}}}}}"
    config = _config(tmp_path, cheap.url, port, state)
    url = f"http://127.0.0.1:{port}"
    process = _serve(config, "--workers", "2")
    try:
        _ready(url, process)
        first, second = _workers(process, 2)
        assert all(_chat(url).status_code == 200 for _ in range(6))
        first.kill()
        first.wait(10)
        # The survivor keeps serving while the parent starts the dead worker again.
        assert _chat(url).status_code == 200
        workers = _workers(process, 2)
        assert second in workers
        assert first.pid not in {worker.pid for worker in workers}
        assert all(_chat(url).status_code == 200 for _ in range(6))
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "workers    2 processes" in err
    assert "worker 0" in err or "worker 1" in err
    assert "starting it again" in err
    # Each worker journals on its own; all of them were closed cleanly.
    assert (tmp_path / "ledger.sqlite3.journal").exists()
    assert (tmp_path / "ledger.sqlite3.w1.journal").exists()
    # A worker killed with -9 loses the access lines it had not yet written, nothing more.
    assert err.count(" 200 ok ") >= 7


def test_a_later_run_with_fewer_workers_replays_the_others_journals(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite3"
    # Worker 2 of an earlier run held money for a request, then the run ended abruptly.
    third = SqliteLedger(ledger, worker=2)
    held_for = HeldFor("req-of-w2", 1.0, "openai-chat", "m", "cheap", "deepseek", "m")
    third.opened(Reservation(7, Rung.CHEAP, None, 0.25, 2e9, held_for=held_for))
    third.journal.close()
    journal = tmp_path / "ledger.sqlite3.w2.journal"
    assert journal.exists()
    # This run has two workers: nobody would open worker 2's journal, so it is replayed.
    recover_journals(ledger, keep=2)
    assert not journal.exists()
    (row,) = read_rows(ledger)
    assert (row["request_id"], row["outcome"], row["cost_usd"]) == ("req-of-w2", "unrecorded", 0.25)
