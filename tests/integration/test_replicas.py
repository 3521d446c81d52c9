"""Three `rungway serve` processes sharing one Redis and one PostgreSQL, as three replicas
behind a load balancer: a client spreads its requests over them round-robin.

Each replica has a ledger file and journal of its own (as on its own machine); budgets,
quota state, disables and usage polls are shared through Redis, and every ledger row
drains into PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson
import pytest
import yaml

from rungway.budget import cost_ceiling
from rungway.sim import Scenario, SimUpstream, TimeoutFault
from tests.services import POSTGRES_DSN, REDIS_URL

SUBSCRIPTION_TOKEN = "sk-ant-oat01-replicas-plan"
CHEAP_KEY = "sk-replicas-cheap"
BACKUP_KEY = "sk-replicas-backup"
CLAUDE = "claude-sonnet-4-5"
DEEPSEEK = "deepseek-chat"
SUBSCRIPTION_WINDOW_S = 8
POLL_INTERVAL_S = 2.0
HELLO = [{"role": "user", "content": "Say hello."}]


def _subscription() -> Scenario:
    # Real time, a short window three answers empty: the reset comes within the test.
    return Scenario.model_validate(
        {
            "name": "replicas-plan",
            "api": "anthropic",
            "quota_headers": "anthropic-unified",
            "usage_endpoint": "claude",
            # These tests send the OpenAI shape through the plan: it does not check its
            # client here, and its connection is widened (`clients: any`).
            "auth": {"kind": "bearer", "token": SUBSCRIPTION_TOKEN, "clients": "any"},
            "models": [{"id": CLAUDE, "context_window": 200000, "max_output_tokens": 8192}],
            "windows": [
                {
                    "name": "5h",
                    "claim": "five_hour",
                    "capacity": 300,
                    "length_s": SUBSCRIPTION_WINDOW_S,
                }
            ],
            "response": {"output_tokens": 100, "chunk_tokens": 20},
        }
    )


def _openai(name: str, token: str) -> Scenario:
    return Scenario.model_validate(
        {
            "name": name,
            "api": "openai",
            "quota_headers": "openai",
            "auth": {"kind": "bearer", "token": token},
            "models": [{"id": DEEPSEEK, "context_window": 64000, "max_output_tokens": 8192}],
            "response": {"output_tokens": 24, "chunk_tokens": 4, "first_byte_ms": 20},
        }
    )


@dataclass
class Sims:
    subscription: SimUpstream
    cheap: SimUpstream
    backup: SimUpstream

    def posts(self, sim: SimUpstream) -> int:
        """Model requests the upstream has received (usage polls not counted)."""
        return sum(1 for r in sim.requests if r.method == "POST")

    def usage_polls(self) -> int:
        return sum(1 for r in self.subscription.requests if r.path == "/api/oauth/usage")


@pytest.fixture
def sims() -> Iterator[Sims]:
    with (
        SimUpstream(_subscription()) as subscription,
        SimUpstream(_openai("replicas-cheap", CHEAP_KEY)) as cheap,
        SimUpstream(_openai("replicas-backup", BACKUP_KEY)) as backup,
    ):
        yield Sims(subscription, cheap, backup)


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Cluster:
    """Three replicas of one config, each on its own port, ledger file and journal."""

    def __init__(self, folder: Path, document: dict[str, Any]) -> None:
        self.folder = folder
        self.document = document
        self.ports = [_port() for _ in range(3)]
        self.urls = [f"http://127.0.0.1:{port}" for port in self.ports]
        self.processes: list[subprocess.Popen[str] | None] = [None, None, None]
        self.printed: list[str] = []

    def start(self) -> None:
        for index in range(3):
            self.processes[index] = self.spawn(index)
        for index in range(3):
            self.ready(index)

    def stop(self) -> None:
        for process in self.processes:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGINT)
        for index, process in enumerate(self.processes):
            if process is not None:
                _, err = process.communicate(timeout=30)
                self.printed.append(err)
                assert process.returncode == 0, err
                self.processes[index] = None

    def spawn(self, index: int) -> subprocess.Popen[str]:
        document = {
            **self.document,
            "server": {"port": self.ports[index]},
            "ledger": {
                **self.document["ledger"],
                "path": str(self.folder / f"replica-{index}.sqlite3"),
            },
        }
        config = self.folder / f"replica-{index}.yaml"
        config.write_text(yaml.safe_dump(document))
        return subprocess.Popen(
            [sys.executable, "-m", "rungway", "serve", "--config", str(config), "--quiet"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    def ready(self, index: int) -> None:
        process = self.processes[index]
        assert process is not None
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.communicate()[1]
            try:
                health = httpx.get(f"{self.urls[index]}/healthz").json()
                if health["status"] == "ok":
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"replica {index} did not start"
            time.sleep(0.05)


@pytest.fixture
def cluster(sims: Sims, tmp_path: Path, redis_prefix: str, pg_schema: str) -> Iterator[Cluster]:
    secrets = {"plan": SUBSCRIPTION_TOKEN, "cheap": CHEAP_KEY, "backup": BACKUP_KEY}
    for name, value in secrets.items():
        (tmp_path / f"{name}.secret").write_text(value)

    def connection(name: str, provider: str, auth: str, url: str, model: str) -> dict[str, Any]:
        return {
            "id": name,
            "provider": provider,
            "auth": auth,
            "credential": {"file": str(tmp_path / f"{name}.secret")},
            "base_url": url,
            "models": [model],
            **({"clients": "any"} if auth == "oauth" else {}),
        }

    document: dict[str, Any] = {
        "state": {"store": "redis", "redis": {"url": REDIS_URL, "prefix": redis_prefix}},
        "ledger": {"postgres": {"dsn": POSTGRES_DSN, "schema": pg_schema}},
        "quota": {"poll_interval_s": POLL_INTERVAL_S},
        "ladder": {"rung_budget_usd": {"cheap": 0.002, "premium": 0}},
        "connections": [
            connection("plan", "anthropic", "oauth", sims.subscription.url, CLAUDE),
            connection("cheap", "deepseek", "apikey", sims.cheap.url + "/v1", DEEPSEEK),
            connection("backup", "deepseek", "apikey", sims.backup.url + "/v1", DEEPSEEK),
        ],
    }
    running = Cluster(tmp_path, document)
    yield running
    running.stop()


def _chat(url: str, model: str, client: httpx.Client | None = None) -> httpx.Response:
    body = {"model": model, "max_tokens": 64, "messages": HELLO}
    post = client.post if client is not None else httpx.post
    return post(f"{url}/v1/chat/completions", json=body, timeout=30)


async def _ledger(schema: str) -> list[asyncpg.Record]:
    connection = await asyncpg.connect(POSTGRES_DSN)
    try:
        return list(
            await connection.fetch(
                f"SELECT request_id, connection_id, outcome, rung, cost_usd, input_tokens, "
                f"output_tokens FROM {schema}.requests"
            )
        )
    finally:
        await connection.close()


def test_three_replicas_keep_one_budget_and_the_ledger_matches_the_upstreams(
    cluster: Cluster, sims: Sims, pg_schema: str
) -> None:
    cluster.document["connections"] = [
        each for each in cluster.document["connections"] if each["id"] == "cheap"
    ]
    cluster.start()

    async def storm() -> list[httpx.Response]:
        urls = itertools.cycle(cluster.urls)
        body = {"model": DEEPSEEK, "max_tokens": 64, "messages": HELLO}
        async with httpx.AsyncClient(timeout=60) as client:
            return await asyncio.gather(
                *(client.post(f"{next(urls)}/v1/chat/completions", json=body) for _ in range(192))
            )

    answers = asyncio.run(storm())
    statuses = {answer.status_code for answer in answers}
    assert statuses <= {200, 429}, statuses
    served = sum(answer.status_code == 200 for answer in answers)
    assert 0 < served < 192, "the budget let some through and stopped the rest"
    refused = next(answer for answer in answers if answer.status_code == 429)
    assert "budget" in refused.json()["error"]["message"]
    cluster.stop()  # each replica drains its rows into PostgreSQL as it stops

    rows = asyncio.run(_ledger(pg_schema))
    ok = [row for row in rows if row["outcome"] == "ok"]
    assert len(ok) == served == sims.posts(sims.cheap)
    assert len({row["request_id"] for row in rows}) == len(rows), "no row twice"
    tally = sims.cheap.tally.by_model()[DEEPSEEK]
    assert sum(row["input_tokens"] for row in ok) == tally.input_tokens
    assert sum(row["output_tokens"] for row in ok) == tally.output_tokens
    spent = sum(row["cost_usd"] for row in rows if row["rung"] == "cheap")
    body = {"model": DEEPSEEK, "max_tokens": 64, "messages": HELLO}
    reservation = cost_ceiling("deepseek", DEEPSEEK, body, len(orjson.dumps(body)))
    # Settled spend stays within the budget plus one request's reservation, cluster-wide.
    assert spent <= 0.002 + reservation


@pytest.mark.slow
def test_a_plan_spent_through_one_replica_is_spent_for_all_until_its_reset(
    cluster: Cluster, sims: Sims
) -> None:
    cluster.document["ladder"] = {"rung_budget_usd": {"cheap": 1.0, "premium": 0}}
    cluster.start()
    started = time.monotonic()
    first, second, third = cluster.urls
    with httpx.Client() as client:
        # Spend the plan through replica A until A itself steps up to the cheap rung.
        for _ in range(10):
            answer = _chat(first, "auto/thrifty", client)
            assert answer.status_code == 200, answer.text
            if answer.headers["x-rungway-rung"] != "subscription":
                break
        else:
            raise AssertionError("the plan never ran out")
        subscription_posts = sims.posts(sims.subscription)
        # B and C learned it from A: neither sends the plan a single request.
        for url in (second, third) * 3:
            answer = _chat(url, "auto/thrifty", client)
            assert answer.status_code == 200, answer.text
            assert answer.headers["x-rungway-rung"] == "cheap"
        assert sims.posts(sims.subscription) == subscription_posts
        # After the reset every replica's first request goes back to the plan.
        time.sleep(SUBSCRIPTION_WINDOW_S + 0.5)
        for url in cluster.urls:
            answer = _chat(url, "auto/thrifty", client)
            assert answer.headers["x-rungway-rung"] == "subscription", url
    elapsed = time.monotonic() - started
    # The plan's usage endpoint was polled at most once per interval across the cluster
    # (plus once for the first reading and once after the reset): three replicas polling
    # on their own would have polled about three times as often.
    assert 1 <= sims.usage_polls() <= elapsed / POLL_INTERVAL_S + 2


@pytest.mark.slow
def test_a_disable_on_one_replica_holds_on_all_and_across_a_restart(
    cluster: Cluster, sims: Sims
) -> None:
    cluster.document["ladder"] = {"rung_budget_usd": {"cheap": 1.0, "premium": 0}}
    cluster.start()
    first, second, third = cluster.urls
    assert httpx.post(f"{first}/admin/connections/cheap/disable").is_success
    cheap_posts = sims.posts(sims.cheap)
    for url in (second, third):
        assert _chat(url, DEEPSEEK).status_code == 200
    assert sims.posts(sims.cheap) == cheap_posts, "B and C honour A's disable at once"
    assert sims.posts(sims.backup) == 2

    cluster.stop()
    cluster.start()
    for url in cluster.urls:
        assert _chat(url, DEEPSEEK).status_code == 200
    assert sims.posts(sims.cheap) == cheap_posts, "the disable outlived the restart"
    assert sims.posts(sims.backup) == 5


@pytest.mark.slow
def test_a_replica_killed_under_load_frees_its_holds_after_the_ttl_and_records_them_later(
    cluster: Cluster, sims: Sims, pg_schema: str
) -> None:
    body = {"model": DEEPSEEK, "max_tokens": 64, "messages": HELLO}
    ceiling = cost_ceiling("deepseek", DEEPSEEK, body, len(orjson.dumps(body)))
    ttl_s = 4.0
    cluster.document["ladder"] = {
        "rung_budget_usd": {"cheap": 4.5 * ceiling, "premium": 0},
        "reservation_ttl_s": ttl_s,
    }
    cluster.document["connections"] = [
        each for each in cluster.document["connections"] if each["id"] == "cheap"
    ]
    cluster.start()
    first, second, _ = cluster.urls
    # Four requests in flight on A hold four ceilings of the budget; then A dies.
    for _ in range(4):
        sims.cheap.push_fault(TimeoutFault(delay_s=30))
    loaders = [threading.Thread(target=_chat_quietly, args=(first,), daemon=True) for _ in range(4)]
    for loader in loaders:
        loader.start()
    _eventually(lambda: sims.posts(sims.cheap) == 4)
    killed = cluster.processes[0]
    assert killed is not None
    killed.kill()
    killed.communicate(timeout=10)
    killed_at = time.monotonic()
    cluster.processes[0] = None

    refused = _chat(second, DEEPSEEK)
    assert refused.status_code == 429, "the dead replica's holds still count"
    assert "budget" in refused.json()["error"]["message"]
    time.sleep(max(0.0, ttl_s + 0.5 - (time.monotonic() - killed_at)))
    assert _chat(second, DEEPSEEK).status_code == 200, "its holds expired cluster-wide"

    # A starts again: its journal's four open holds become `unrecorded` rows at their
    # ceiling, in PostgreSQL and in the shared spend, so the budget is spent again.
    cluster.processes[0] = cluster.spawn(0)
    cluster.ready(0)
    assert _chat(second, DEEPSEEK).status_code == 429
    cluster.stop()
    rows = asyncio.run(_ledger(pg_schema))
    outcomes = sorted(row["outcome"] for row in rows if row["connection_id"] == "cheap")
    assert outcomes.count("unrecorded") == 4
    assert outcomes.count("ok") == 1
    assert len({row["request_id"] for row in rows}) == len(rows)


def _chat_quietly(url: str) -> None:
    with contextlib.suppress(httpx.HTTPError):
        _chat(url, DEEPSEEK)


def _eventually(check: Callable[[], bool], within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while not check():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.02)
