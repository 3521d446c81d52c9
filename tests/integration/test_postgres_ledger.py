"""The ledger on PostgreSQL, against the real server on this machine.

Each gateway keeps its local SQLite ledger; its outbox drains into PostgreSQL, where every
report reads. PostgreSQL unreachable at start, lost mid-run, and a gateway killed with
kill -9: in each case every row arrives once, and none twice. Faults are cut through a
loopback proxy between the gateway and PostgreSQL, never by stopping the shared server.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import yaml

from rungway.ledger.pg_schema import LATEST, SchemaConflict, migrate, quoted
from rungway.ledger.report import spend_report
from rungway.ledger.sqlite import read_matching, read_recent, read_rows
from rungway.server.requests import request_detail, request_summary
from rungway.sim import Scenario, SimUpstream
from tests.integration.conftest import CLAUDE, DEEPSEEK, RunningGateway, StartGateway
from tests.proxy import CuttableProxy
from tests.services import POSTGRES_DSN

PG_TARGET = ("127.0.0.1", 5432)
HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]


def _pg(query: str, *args: Any) -> list[asyncpg.Record]:
    async def run() -> list[asyncpg.Record]:
        connection = await asyncpg.connect(POSTGRES_DSN)
        try:
            return list(await connection.fetch(query, *args))
        finally:
            await connection.close()

    return asyncio.run(run())


def _pg_ids(schema: str) -> list[str]:
    """The request ids PostgreSQL holds (none before a gateway has made the table)."""
    try:
        return [row[0] for row in _pg(f"SELECT request_id FROM {quoted(schema)}.requests")]
    except asyncpg.UndefinedTableError:
        return []


def _until(condition: Callable[[], bool], what: str, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.05)


def _postgres_section(schema: str, address: str = "127.0.0.1:5432") -> dict[str, Any]:
    return {"dsn": f"postgresql://postgres@{address}/postgres", "schema": schema}


def _start(
    start_gateway: StartGateway, tmp_path: Path, schema: str, address: str = "127.0.0.1:5432"
) -> RunningGateway:
    ledger = {
        "path": str(tmp_path / "ledger.sqlite3"),
        "postgres": _postgres_section(schema, address),
    }
    return start_gateway(ledger=ledger)


def _ask(gateway: RunningGateway, model: str) -> str:
    answer = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        json={"model": model, "messages": HELLO, "max_tokens": 32},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return answer.headers["x-rungway-request-id"]


def _postgres_health(gateway: RunningGateway) -> dict[str, Any]:
    body = httpx.get(f"{gateway.url}/healthz", timeout=5).json()
    [store] = [each for each in body["stores"] if each["store"] == "postgres"]
    return {"status": body["status"], **store}


def test_rows_drain_into_postgres_and_every_report_reads_the_same(
    start_gateway: StartGateway, tmp_path: Path, pg_schema: str
) -> None:
    gateway = _start(start_gateway, tmp_path, pg_schema)
    ids = [_ask(gateway, DEEPSEEK) for _ in range(3)] + [_ask(gateway, CLAUDE) for _ in range(3)]
    gateway.gateway.ledger.flush()
    _until(lambda: len(_pg_ids(pg_schema)) == 6, "six rows are in postgres")
    assert sorted(_pg_ids(pg_schema)) == sorted(ids)
    [version] = _pg(f"SELECT version FROM {quoted(pg_schema)}.rungway_migrations")
    assert version[0] == LATEST

    path = gateway.ledger_path
    listed = httpx.get(f"{gateway.url}/admin/requests?limit=50", timeout=5).json()["requests"]
    assert listed == [request_summary(row) for row in read_recent(path, 50)]
    one = httpx.get(f"{gateway.url}/admin/requests/{ids[0][:8]}", timeout=5)
    assert one.status_code == 200
    assert one.json() == request_detail(read_matching(path, ids[0][:8], 2)[0])
    spend = httpx.get(f"{gateway.url}/admin/spend?by=model&period=month", timeout=5).json()
    local = spend_report(path, since=spend["since"], until=spend["until"], by="model")
    assert [row["group"] for row in spend["rows"]] == [row.group for row in local.rows]
    for shown, row in zip(spend["rows"], local.rows, strict=True):
        assert shown["requests"] == row.requests
        assert shown["input_tokens"] == row.input_tokens
        assert shown["cost_usd"] == pytest.approx(row.cost_usd)
        assert shown["list_cost_usd"] == pytest.approx(row.list_cost_usd)
    assert spend["total"]["cost_usd"] > 0

    health = _postgres_health(gateway)
    assert (health["status"], health["up"]) == ("ok", True)
    assert health["detail"] == "postgres at 127.0.0.1:5432/postgres: 0 rows waiting"


def test_the_cli_reads_postgres_when_no_gateway_answers(
    start_gateway: StartGateway, tmp_path: Path, pg_schema: str, unused_port: int
) -> None:
    gateway = _start(start_gateway, tmp_path, pg_schema)
    request_id = _ask(gateway, DEEPSEEK)
    gateway.gateway.ledger.flush()
    _until(lambda: len(_pg_ids(pg_schema)) == 1, "the row is in postgres")
    # Another machine's view: a config naming the same PostgreSQL, no gateway at its port.
    config = tmp_path / "elsewhere.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "server": {"port": unused_port},
                "ledger": {
                    "path": str(tmp_path / "elsewhere.sqlite3"),
                    "postgres": {"dsn": {"env": "PG_DSN"}, "schema": pg_schema},
                },
                "connections": [
                    {"id": "local", "provider": "ollama", "auth": "none", "models": ["qwen3"]}
                ],
            }
        )
    )
    env = {"PATH": "/usr/bin:/bin", "COLUMNS": "200", "HOME": str(tmp_path), "PG_DSN": POSTGRES_DSN}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "rungway", *args, "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=env,
        )

    spent = run("spend", "--json")
    assert spent.returncode == 0, spent.stderr
    assert "reading the ledger in postgres at 127.0.0.1:5432/postgres" in spent.stderr
    payload = json.loads(spent.stdout)
    assert payload["total"]["requests"] == 1
    assert payload["total"]["cost_usd"] > 0
    explained = run("explain", request_id[:8])
    assert explained.returncode == 0, explained.stderr
    assert f"{request_id} at " in explained.stdout
    assert not (tmp_path / "elsewhere.sqlite3").exists()


def test_postgres_unreachable_at_start_the_gateway_serves_and_rows_drain_later(
    start_gateway: StartGateway, tmp_path: Path, pg_schema: str
) -> None:
    with CuttableProxy(PG_TARGET, up=False) as proxy:
        gateway = _start(start_gateway, tmp_path, pg_schema, proxy.address)
        ids = [_ask(gateway, DEEPSEEK) for _ in range(4)]
        _until(lambda: "4 rows waiting" in _postgres_health(gateway)["detail"], "4 rows wait")
        health = _postgres_health(gateway)
        assert (health["status"], health["up"]) == ("degraded", False)
        assert f"postgres at {proxy.address}/postgres unreachable" in health["detail"]
        refused = httpx.get(f"{gateway.url}/admin/requests", timeout=30)
        assert refused.status_code == 503
        assert refused.json()["error"]["type"] == "ledger_unavailable"
        assert proxy.address in refused.json()["error"]["message"]

        proxy.restore()
        _until(lambda: _postgres_health(gateway)["up"], "postgres is up")
        _until(lambda: sorted(_pg_ids(pg_schema)) == sorted(ids), "the rows drained")
        assert _postgres_health(gateway)["detail"].endswith(": 0 rows waiting")


def test_postgres_lost_mid_run_loses_no_row_and_duplicates_none(
    start_gateway: StartGateway, tmp_path: Path, pg_schema: str
) -> None:
    with CuttableProxy(PG_TARGET) as proxy:
        gateway = _start(start_gateway, tmp_path, pg_schema, proxy.address)
        ids = [_ask(gateway, DEEPSEEK) for _ in range(3)]
        _until(lambda: len(_pg_ids(pg_schema)) == 3, "the first rows drained")

        proxy.cut()
        ids += [_ask(gateway, DEEPSEEK) for _ in range(4)]
        _until(lambda: not _postgres_health(gateway)["up"], "the loss is seen")
        _until(lambda: "4 rows waiting" in _postgres_health(gateway)["detail"], "4 rows wait")
        assert len(_pg_ids(pg_schema)) == 3

        proxy.restore()
        _until(lambda: len(_pg_ids(pg_schema)) == 7, "the waiting rows drained")
        assert sorted(_pg_ids(pg_schema)) == sorted(ids)
        assert sorted(row["request_id"] for row in read_rows(gateway.ledger_path)) == sorted(ids)

        # A crash between PostgreSQL's commit and the outbox's delete sends rows again:
        # queue every row once more, and PostgreSQL still holds each once.
        db = sqlite3.connect(gateway.ledger_path)
        with db:
            db.execute("INSERT INTO outbox (request_id) SELECT request_id FROM requests")
        db.close()
        _until(lambda: _postgres_health(gateway)["detail"].endswith(": 0 rows waiting"), "resent")
        assert sorted(_pg_ids(pg_schema)) == sorted(ids)


def test_replicas_starting_at_once_migrate_the_schema_once(pg_schema: str) -> None:
    async def race() -> list[int]:
        connections = [await asyncpg.connect(POSTGRES_DSN) for _ in range(4)]
        try:
            return list(await asyncio.gather(*(migrate(c, pg_schema) for c in connections)))
        finally:
            for connection in connections:
                await connection.close()

    assert asyncio.run(race()) == [LATEST] * 4
    applied = _pg(f"SELECT version FROM {quoted(pg_schema)}.rungway_migrations")
    assert [row[0] for row in applied] == list(range(1, LATEST + 1))


def test_a_schema_holding_someone_elses_requests_table_is_refused_with_the_fix(
    pg_schema: str,
) -> None:
    _pg(f"CREATE TABLE {quoted(pg_schema)}.requests (id serial)")

    async def run() -> None:
        connection = await asyncpg.connect(POSTGRES_DSN)
        try:
            await migrate(connection, pg_schema)
        finally:
            await connection.close()

    with pytest.raises(SchemaConflict, match=r"set ledger\.postgres\.schema to a schema of"):
        asyncio.run(run())


@pytest.mark.slow
def test_rows_settled_before_a_kill_reach_postgres_after_the_restart(
    tmp_path: Path, pg_schema: str, unused_port: int
) -> None:
    model = "gpt-4.1-mini"
    scenario = Scenario.model_validate(
        {
            "name": "metered",
            "api": "openai",
            "auth": {"kind": "bearer", "token": "sk-metered"},
            "models": [{"id": model}],
            "response": {"output_tokens": 40, "chunk_tokens": 4, "chunk_interval_ms": 15},
        }
    )
    with SimUpstream(scenario) as upstream, CuttableProxy(PG_TARGET, up=False) as proxy:
        (tmp_path / "metered.secret").write_text("sk-metered")
        config = tmp_path / "rungway.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "server": {"port": unused_port},
                    "ledger": {
                        "path": str(tmp_path / "ledger.sqlite3"),
                        "postgres": _postgres_section(pg_schema, proxy.address),
                    },
                    "quota": {"poll_interval_s": 0},
                    "ladder": {"rung_budget_usd": {"cheap": 5.0}, "reservation_ttl_s": 3.0},
                    "connections": [
                        {
                            "id": "metered",
                            "provider": "openai",
                            "auth": "apikey",
                            "credential": {"file": str(tmp_path / "metered.secret")},
                            "base_url": f"{upstream.url}/v1",
                            "models": [model],
                        }
                    ],
                }
            )
        )
        url = f"http://127.0.0.1:{unused_port}"
        # First run: PostgreSQL does not answer, so every row is still local at the kill.
        first = _serve(config, url)
        whole: list[str] = []
        stop = threading.Event()
        loaders = [threading.Thread(target=_load, args=(url, model, stop, whole)) for _ in range(8)]
        for loader in loaders:
            loader.start()
        _until(lambda: len(whole) >= 20, "twenty requests are answered whole", 30)
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        stop.set()
        for loader in loaders:
            loader.join()

        proxy.restore()
        second = _serve(config, url)
        try:
            # Everything the restart recovered (the journal's rows and any `unrecorded`
            # reservation) reaches PostgreSQL, each row once.
            def local() -> list[str]:
                return sorted(
                    row["request_id"] for row in read_rows(tmp_path / "ledger.sqlite3", 10_000)
                )

            _until(lambda: sorted(_pg_ids(pg_schema)) == local(), "postgres holds every row", 30)
            assert set(whole) <= set(_pg_ids(pg_schema))
        finally:
            second.terminate()
            second.wait(10)


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


def _load(url: str, model: str, stop: threading.Event, whole: list[str]) -> None:
    """Stream requests one after another until stopped; note those that arrived whole."""
    with httpx.Client(timeout=10) as client:
        while not stop.is_set():
            try:
                with client.stream(
                    "POST",
                    f"{url}/v1/chat/completions",
                    json={"model": model, "messages": HELLO, "max_tokens": 60, "stream": True},
                ) as response:
                    body = b"".join(response.iter_bytes())
                    if body.rstrip().endswith(b"data: [DONE]"):
                        whole.append(response.headers["x-rungway-request-id"])
            except httpx.TransportError:
                return
