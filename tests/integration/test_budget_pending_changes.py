"""Settles that wait for an unreachable Redis survive the gateway: written beside the
ledger while Redis is away, sent once at the next start, and counted once however often
they are sent again."""

from __future__ import annotations

import asyncio
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from rungway.budget import Reservation
from rungway.budget.period import period_start
from rungway.cluster.budget_changes import PendingChanges
from rungway.cluster.budget_scripts import NANO, nano
from rungway.ledger.sqlite import read_rows
from rungway.routing.rungs import Rung
from rungway.sim import Scenario, SimUpstream
from tests.private_redis import PrivateRedis
from tests.proxy import CuttableProxy

from .test_shared_budget import NOW, Ledger, shared_budget

PREFIX = "rw"
MODEL = "gpt-4.1-mini"
HELLO: list[dict[str, Any]] = [{"role": "user", "content": "Say hello."}]


def _until(condition: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


def _waiting(path: Path) -> int:
    """How many changes the file of pending changes holds."""
    if not path.exists():
        return 0
    db = sqlite3.connect(path)
    try:
        return int(db.execute("SELECT COUNT(*) FROM changes").fetchone()[0])
    finally:
        db.close()


def _shared(server: PrivateRedis, rung: str, at: float) -> tuple[float, float]:
    """Redis's settled spend and open holds of `rung`, in dollars."""
    client = server.client()
    try:
        spent = client.hget(
            f"{PREFIX}:budget:spent:rung:{rung}:{int(period_start('month', at))}", "s"
        )
        held = client.get(f"{PREFIX}:budget:reserved:rung:{rung}")
    finally:
        client.close()
    return (
        int(spent) / NANO if spent is not None else float("nan"),
        int(held) / NANO if held is not None else 0.0,
    )


def test_changes_waiting_for_redis_are_sent_once_by_the_next_process(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3.budget-queue"
    ledger = Ledger()

    async def first(proxy: CuttableProxy) -> None:
        url = f"redis://{proxy.address}/0"
        async with shared_budget(PREFIX, ledger, url=url, pending=PendingChanges(path)) as (
            budget,
            link,
        ):
            settled = await budget.reserve(Rung.CHEAP, None, 0.3, NOW)
            released = await budget.reserve(Rung.CHEAP, None, 0.2, NOW)
            assert isinstance(settled, Reservation)
            assert isinstance(released, Reservation)
            proxy.cut()
            budget.settle(settled, 0.25, NOW)
            ledger.record(Rung.CHEAP, 0.25)
            budget.release(released)
            budget.spend(Rung.PREMIUM, None, 0.7, NOW, request_id="r-unbudgeted")
            ledger.record(Rung.PREMIUM, 0.7)
            # On disk before the process stops, so a kill would have lost nothing either.
            await asyncio.to_thread(_until, lambda: _waiting(path) == 3, "all three are on disk")
            assert not link.up

    async def later(proxy: CuttableProxy) -> None:
        url = f"redis://{proxy.address}/0"
        async with shared_budget(PREFIX, ledger, url=url, pending=PendingChanges(path)) as (
            budget,
            _,
        ):
            await budget.flush()

    with PrivateRedis(tmp_path) as server, CuttableProxy(("127.0.0.1", server.port)) as proxy:
        asyncio.run(first(proxy))
        assert _waiting(path) == 3
        kept = tmp_path / "copy"
        shutil.copy(path, kept)
        proxy.restore()
        asyncio.run(later(proxy))
        assert _waiting(path) == 0
        assert _shared(server, "cheap", NOW) == (0.25, 0.0)
        assert _shared(server, "premium", NOW) == (0.7, 0.0)
        # As if the last process died after Redis took them but before it struck them out.
        shutil.copy(kept, path)
        asyncio.run(later(proxy))
        assert _waiting(path) == 0
        assert _shared(server, "cheap", NOW) == (0.25, 0.0)
        assert _shared(server, "premium", NOW) == (0.7, 0.0)


@pytest.mark.slow
def test_settles_queued_while_redis_is_away_reach_it_after_the_gateway_restarts(
    tmp_path: Path, unused_port: int
) -> None:
    scenario = Scenario.model_validate(
        {
            "name": "metered",
            "api": "openai",
            "auth": {"kind": "bearer", "token": "sk-metered"},
            "models": [{"id": MODEL}],
            "response": {"output_tokens": 40, "chunk_tokens": 4, "chunk_interval_ms": 30},
        }
    )
    with (
        SimUpstream(scenario) as upstream,
        PrivateRedis(tmp_path) as server,
        CuttableProxy(("127.0.0.1", server.port)) as proxy,
    ):
        (tmp_path / "metered.secret").write_text("sk-metered")
        config = tmp_path / "rungway.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "server": {"port": unused_port},
                    "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
                    "state": {
                        "store": "redis",
                        "redis": {"url": f"redis://{proxy.address}/0", "prefix": PREFIX},
                    },
                    "quota": {"poll_interval_s": 0},
                    "ladder": {"rung_budget_usd": {"cheap": 50.0, "premium": 50.0}},
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
        url = f"http://127.0.0.1:{unused_port}"
        pending = tmp_path / "ledger.sqlite3.budget-queue"
        first = _serve(config, url)
        whole: list[str] = []
        stop = threading.Event()
        loaders = [threading.Thread(target=_load, args=(url, stop, whole)) for _ in range(6)]
        for loader in loaders:
            loader.start()
        _until(lambda: len(whole) >= 12, "a dozen requests are answered whole")
        # Redis goes away with streams in flight: their settles wait for it.
        proxy.cut()
        _until(lambda: _waiting(pending) > 0, "settles wait on disk")
        stop.set()
        for loader in loaders:
            loader.join()
        first.send_signal(signal.SIGTERM)  # a stop, not a kill: it shuts down in order
        first.wait(30)
        waiting = _waiting(pending)
        assert waiting > 0
        kept = tmp_path / "copy"
        shutil.copy(pending, kept)

        proxy.restore()
        for _ in range(2):  # the second time as if the last run never struck them out
            second = _serve(config, url)
            try:
                _until(lambda: _waiting(pending) == 0, "the waiting settles are sent")
                rows = read_rows(tmp_path / "ledger.sqlite3", 10_000)
                rung = next(row["rung"] for row in rows if row["cost_usd"] > 0)
                spent = sum(nano(row["cost_usd"]) for row in rows if row["rung"] == rung) / NANO
                assert spent > 0
                assert _shared(server, rung, time.time()) == pytest.approx((spent, 0.0))
            finally:
                second.send_signal(signal.SIGTERM)
                second.wait(30)
            shutil.copy(kept, pending)


def _serve(config: Path, url: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", "rungway", "serve", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.05)
    process.kill()
    raise AssertionError("the gateway did not start")


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
