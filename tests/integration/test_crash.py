"""Crash safety: `kill -9` of a gateway under load, then a restart.

Every request whose response reached its client whole is in the ledger after the restart,
and every reservation the crash left open is a ledger row of its own (`unrecorded`)
costing its ceiling: the rows are the upstream's generations, everything it billed is
covered by them, and the budget keeps counting it after any expiry.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from rungway.ledger.journal import journal_path
from rungway.ledger.sqlite import read_rows
from rungway.pricing import TokenCounts, rates_for
from rungway.sim import Scenario, SimUpstream

MODEL = "gpt-4.1-mini"
TTL_S = 3.0
HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]

pytestmark = pytest.mark.slow


@pytest.fixture
def upstream() -> Iterator[SimUpstream]:
    scenario = Scenario.model_validate(
        {
            "name": "metered",
            "api": "openai",
            "auth": {"kind": "bearer", "token": "sk-metered"},
            "models": [{"id": MODEL}],
            # Paced, so that many streams are in flight at the moment of the kill.
            "response": {"output_tokens": 40, "chunk_tokens": 4, "chunk_interval_ms": 15},
        }
    )
    with SimUpstream(scenario) as sim:
        yield sim


class Gateway:
    """`rungway serve` in a child process."""

    def __init__(self, config: Path, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self._command = [sys.executable, "-m", "rungway", "serve", "--config", str(config)]
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self._process = subprocess.Popen(
            self._command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        raise AssertionError("the gateway did not start")

    def kill(self) -> None:
        assert self._process is not None
        os.kill(self._process.pid, signal.SIGKILL)
        self._process.wait()

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(10)


@pytest.fixture
def gateway(upstream: SimUpstream, tmp_path: Path) -> Iterator[Gateway]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (tmp_path / "metered.secret").write_text("sk-metered")
    config = tmp_path / "rungway.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "server": {"port": port},
                "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
                "quota": {"poll_interval_s": 0},
                "ladder": {"rung_budget_usd": {"cheap": 5.0}, "reservation_ttl_s": TTL_S},
                "connections": [
                    {
                        "id": "metered",
                        "provider": "openai",
                        "auth": "apikey",
                        "credential": {"file": str(tmp_path / "metered.secret")},
                        "base_url": f"{upstream.url}/v1",
                        "models": [MODEL],
                    }
                ],
            }
        )
    )
    running = Gateway(config, port)
    running.start()
    yield running
    running.stop()


def _load(url: str, stop: threading.Event, whole: list[str]) -> None:
    """Stream requests one after another until stopped; note those that arrived whole."""
    with httpx.Client(timeout=10) as client:
        while not stop.is_set():
            try:
                with client.stream(
                    "POST",
                    f"{url}/v1/chat/completions",
                    json={"model": MODEL, "messages": HELLO, "max_tokens": 60, "stream": True},
                ) as response:
                    body = b"".join(response.iter_bytes())
                    if body.rstrip().endswith(b"data: [DONE]"):
                        whole.append(response.headers["x-rungway-request-id"])
            except httpx.TransportError:
                return


def _list_cost(sim: SimUpstream) -> float:
    rates = rates_for("openai", MODEL)
    assert rates is not None
    total = sim.tally.total()
    return rates.cost(TokenCounts(total.input_tokens, total.output_tokens))


def _open_reservations(ledger: Path) -> list[tuple[float, float]]:
    db = sqlite3.connect(journal_path(ledger))
    try:
        return db.execute("SELECT amount, expires_at FROM reservations").fetchall()
    finally:
        db.close()


def test_kill_9_under_load_records_every_row_and_counts_requests_cut_off_at_their_ceiling(
    gateway: Gateway, upstream: SimUpstream, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.sqlite3"
    stop = threading.Event()
    whole: list[str] = []
    workers = [threading.Thread(target=_load, args=(gateway.url, stop, whole)) for _ in range(16)]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + 10
    while len(whole) < 40 and time.monotonic() < deadline:
        time.sleep(0.01)
    gateway.kill()
    killed_at = time.time()
    stop.set()
    for worker in workers:
        worker.join()
    assert len(whole) >= 40, "the load never got going"

    # Streams cut by the kill left their reservations open in the journal.
    orphans = _open_reservations(ledger)
    assert orphans, "no stream was in flight at the kill"

    gateway.start()
    rows = {row["request_id"]: row for row in read_rows(ledger, limit=10_000)}
    lost = [request_id for request_id in whole if request_id not in rows]
    assert lost == [], f"{len(lost)} responses that reached their clients have no ledger row"
    unrecorded = [row for row in rows.values() if row["outcome"] == "unrecorded"]
    assert sorted(row["cost_usd"] for row in unrecorded) == pytest.approx(
        sorted(amount for amount, _ in orphans)
    )
    assert all(row["upstream_model"] == MODEL and row["rung"] == "cheap" for row in unrecorded)
    # A reservation is opened before its request is sent: the kill can fall in between.
    served = upstream.tally.total().requests
    assert served <= len(rows) <= served + len(orphans)
    settled = sum(row["cost_usd"] for row in rows.values())
    # Whatever the upstream billed is in a ledger row.
    assert _list_cost(upstream) <= settled + 1e-9
    assert _open_reservations(ledger) == []

    with httpx.Client(timeout=5) as client:
        spend = client.get(f"{gateway.url}/admin/spend").json()
        assert spend["total"]["unrecorded_requests"] == len(unrecorded)
        assert spend["total"]["unrecorded_usd"] == pytest.approx(
            sum(r["cost_usd"] for r in unrecorded)
        )
        [cheap] = [entry for entry in spend["budgets"]["rungs"] if entry["rung"] == "cheap"]
        assert cheap["spent_usd"] == pytest.approx(settled, abs=1e-9)
        assert cheap["reserved_usd"] == 0.0

        # Past every expiry the crash's reservations would have had, they still count.
        time.sleep(max(0.0, killed_at + TTL_S - time.time()) + 0.1)
        spend = client.get(f"{gateway.url}/admin/spend").json()
        [cheap] = [entry for entry in spend["budgets"]["rungs"] if entry["rung"] == "cheap"]
        assert cheap["spent_usd"] == pytest.approx(settled, abs=1e-9)
