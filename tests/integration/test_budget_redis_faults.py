"""The shared budget against a Redis of the test's own that restarts empty, or answers too
late: no settle is lost, none counted twice, no hold left behind, and the budget still
refuses at its limit.

Each `RedisBudget` stands in for a gateway process; `Ledger` is what the ledger holds, and
each settle's row is written to it as the engine writes it, beside the settle.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from redis.backoff import NoBackoff
from redis.exceptions import ResponseError
from redis.retry import Retry

from rungway.budget import Reservation, Shortfall
from rungway.budget.period import period_start
from rungway.clock import FakeClock
from rungway.cluster.budget import RedisBudget
from rungway.cluster.budget_scripts import APPLY, GIVEN_BACK, NANO, RESERVE, nano
from rungway.ledger.sqlite import read_rows
from rungway.routing.rungs import Rung
from rungway.sim import Scenario, SimUpstream
from tests.private_redis import PrivateRedis

from .conftest import StartGateway
from .test_shared_budget import NOW, Ledger, shared_budget

PREFIX = "rw"
MODEL = "gpt-4.1-mini"
HELLO: list[dict[str, Any]] = [{"role": "user", "content": "Say hello."}]


def figures(server: PrivateRedis) -> tuple[float, float]:
    """What Redis holds for the cheap rung: settled spend and open holds, in dollars."""
    client = server.client()
    try:
        start = int(period_start("month", NOW))
        spent = client.hget(f"{PREFIX}:budget:spent:rung:cheap:{start}", "s")
        held = client.get(f"{PREFIX}:budget:reserved:rung:cheap")
    finally:
        client.close()
    return (
        int(spent) / NANO if spent is not None else float("nan"),
        int(held) / NANO if held is not None else 0.0,
    )


def sleeping(server: PrivateRedis, seconds: float) -> threading.Thread:
    """Make Redis answer nobody for `seconds` (another client's DEBUG SLEEP), returning
    once it has stopped answering; join the thread to wait for it to wake."""
    probe = redis.Redis(
        port=server.port,
        socket_timeout=0.05,
        socket_connect_timeout=0.05,
        retry=Retry(NoBackoff(), 0),
    )
    probe.ping()  # connected before Redis sleeps

    def sleep() -> None:
        busy = server.client()
        try:
            busy.execute_command("DEBUG", "SLEEP", seconds)  # type: ignore[no-untyped-call]
        finally:
            busy.close()

    sleeper = threading.Thread(target=sleep)
    sleeper.start()
    try:
        while True:
            try:
                probe.ping()
            except redis.TimeoutError:
                return sleeper
            time.sleep(0.01)
    finally:
        probe.close()


def ledger_spent(ledger: Ledger) -> float:
    return sum(nano(cost) for _, rung, _, cost in ledger.rows if rung == "cheap") / NANO


async def settle(budget: RedisBudget, ledger: Ledger, held: Reservation, cost: float) -> None:
    """Settle as the engine does: the settle queued, the row written in the same moment."""
    budget.settle(held, cost, NOW)
    ledger.record(Rung.CHEAP, cost)


async def until(check: object, within_s: float = 5.0) -> None:
    deadline = time.monotonic() + within_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.02)


def test_holds_in_flight_across_a_redis_restarted_empty_settle_in_full(tmp_path: Path) -> None:
    ledger = Ledger()
    clock = FakeClock(NOW)

    async def run(server: PrivateRedis) -> None:
        async with (
            shared_budget(PREFIX, ledger, url=server.url, clock=clock) as (a, a_link),
            shared_budget(PREFIX, ledger, url=server.url, clock=clock) as (b, b_link),
        ):
            done = await a.reserve(Rung.CHEAP, None, 0.1, NOW)
            in_flight = [
                await a.reserve(Rung.CHEAP, None, 0.2, NOW),
                await b.reserve(Rung.CHEAP, None, 0.2, NOW),
            ]
            assert isinstance(done, Reservation)
            assert all(isinstance(each, Reservation) for each in in_flight)
            await settle(a, ledger, done, 0.1)
            await a.flush()
            clock.advance(10)
            # A settle queued an instant before Redis goes: its row is in the ledger.
            late = await b.reserve(Rung.CHEAP, None, 0.1, NOW)
            assert isinstance(late, Reservation)
            await settle(b, ledger, late, 0.05)
            server.restart()
            clock.advance(10)
            await until(lambda: a_link.up and b_link.up and not a.pending and not b.pending)
            await asyncio.sleep(0.3)  # every refresh has looked again
            # Seeded from the ledger (0.15) and the two holds still in flight held again.
            assert figures(server) == pytest.approx((0.15, 0.4))
            assert isinstance(await a.reserve(Rung.CHEAP, None, 0.46, NOW), Shortfall)
            for budget, held, cost in zip((a, b), in_flight, (0.15, 0.2), strict=True):
                assert isinstance(held, Reservation)
                await settle(budget, ledger, held, cost)
            # Each settle sent again (its answer lost, say) counts once: and the one that
            # was already on its way when Redis went, too.
            again = zip((a, b, b), (*in_flight, late), (0.15, 0.2, 0.05), strict=True)
            for budget, held, cost in again:
                assert isinstance(held, Reservation)
                budget.settle(held, cost, NOW)
            await a.flush()
            await b.flush()
            assert figures(server) == pytest.approx((ledger_spent(ledger), 0.0))
            assert ledger_spent(ledger) == pytest.approx(0.5)
            await a.refresh(clock.now())
            assert isinstance(await a.reserve(Rung.CHEAP, None, 0.51, NOW), Shortfall)
            assert isinstance(await b.reserve(Rung.CHEAP, None, 0.5, NOW), Reservation)

    with PrivateRedis(tmp_path) as server:
        asyncio.run(run(server))


def test_a_reserve_whose_reply_came_too_late_leaves_no_hold(tmp_path: Path) -> None:
    async def run(server: PrivateRedis) -> None:
        async with shared_budget(PREFIX, Ledger(), url=server.url) as (budget, link):
            assert isinstance(await budget.reserve(Rung.CHEAP, None, 0.1, NOW), Reservation)
            # Another client keeps Redis busy past the reserve's 0.5 s timeout; Redis runs
            # the reserves it already read once it is free again.
            sleeper = await asyncio.to_thread(sleeping, server, 1.5)
            timed_out = await asyncio.gather(
                *(budget.reserve(Rung.CHEAP, None, 0.1, NOW) for _ in range(8))
            )
            assert not any(isinstance(each, Reservation) for each in timed_out)
            await asyncio.to_thread(sleeper.join)
            await until(lambda: link.up and not budget.pending)
            # Only the first hold is still open: the budget takes the rest at once.
            assert figures(server)[1] == pytest.approx(0.1)
            assert isinstance(await budget.reserve(Rung.CHEAP, None, 0.9, NOW), Reservation)

    with PrivateRedis(tmp_path) as server:
        asyncio.run(run(server))


def test_no_amount_below_zero_or_past_finite_reaches_the_spend(redis_prefix: str) -> None:
    async def run() -> None:
        ledger = Ledger()
        async with shared_budget(redis_prefix, ledger) as (budget, link):
            # The scripts themselves refuse a negative or fractional amount.
            client = link.client
            keys = [f"{redis_prefix}:{name}" for name in ("m", "s", "h", "r")]
            hold = client.register_script(RESERVE)
            with pytest.raises(ResponseError, match="whole nano-dollars"):
                await hold(keys[1:] + keys[:1], [repr(NOW), repr(NOW + 60), -5, "1:-5", 60, ""])
            apply = client.register_script(APPLY)
            for figure in ("-1000000000", "1e9", "nan", "inf"):
                with pytest.raises(ResponseError, match="whole nano-dollars"):
                    await apply(keys, ["spend", "", 60, repr(NOW), "", figure])
            # A settle at a figure that is no cost counts its whole hold, never a credit.
            for cost in (-1.0, float("nan"), float("inf")):
                held = await budget.reserve(Rung.CHEAP, None, 0.1, NOW)
                assert isinstance(held, Reservation)
                budget.settle(held, cost, NOW)
                budget.spend(Rung.CHEAP, None, cost, NOW, request_id=f"r-{cost}")
            await budget.flush()
            await budget.refresh(NOW)
            assert budget.rung_spend(NOW)[Rung.CHEAP].spent_usd == pytest.approx(0.3)

    asyncio.run(run())


@pytest.mark.slow
def test_a_gateway_under_load_loses_no_settle_when_redis_restarts_empty(
    start_gateway: StartGateway, tmp_path: Path
) -> None:
    scenario = Scenario.model_validate(
        {
            "name": "metered",
            "api": "openai",
            "auth": {"kind": "bearer", "token": "sk-metered"},
            "models": [{"id": MODEL}],
            "response": {"output_tokens": 40, "chunk_tokens": 4, "chunk_interval_ms": 300},
        }
    )
    with SimUpstream(scenario) as upstream, PrivateRedis(tmp_path) as server:
        (tmp_path / "metered.secret").write_text("sk-metered")
        gateway = start_gateway(
            state_section={"store": "redis", "redis": {"url": server.url, "prefix": PREFIX}},
            ladder={"rung_budget_usd": {"cheap": 50.0, "premium": 50.0}},
            aliases={},
            connections=[
                {
                    "id": "metered",
                    "provider": "openai",
                    "auth": "apikey",
                    "credential": {"file": str(tmp_path / "metered.secret")},
                    "base_url": f"{upstream.url}/v1",
                    "models": [MODEL],
                }
            ],
        )
        whole: list[str] = []
        stop = threading.Event()
        loaders = [
            threading.Thread(target=_load, args=(gateway.url, stop, whole)) for _ in range(6)
        ]
        for loader in loaders:
            loader.start()
        try:
            _until(lambda: len(whole) >= 6, "six streams are answered whole")
            # With streams in flight, which end (3 s each) after Redis is seeded again.
            server.restart()
            answered = len(whole)
            _until(lambda: len(whole) >= answered + 6, "six more after the restart")
        finally:
            stop.set()
            for loader in loaders:
                loader.join()

        def agree() -> bool:
            gateway.ledger.flush()
            rows = read_rows(gateway.ledger_path, 100_000)
            rung = next(row["rung"] for row in rows if row["cost_usd"] > 0)
            spent = sum(nano(row["cost_usd"]) for row in rows if row["rung"] == rung) / NANO
            return shared(server, rung) == pytest.approx((spent, 0.0))

        _until(agree, "Redis holds the ledger's spend and no hold")


def shared(server: PrivateRedis, rung: str) -> tuple[float, float]:
    """What Redis holds for `rung` this month: settled spend and open holds, in dollars."""
    client = server.client()
    try:
        start = int(period_start("month", time.time()))
        spent = client.hget(f"{PREFIX}:budget:spent:rung:{rung}:{start}", "s")
        held = client.get(f"{PREFIX}:budget:reserved:rung:{rung}")
    finally:
        client.close()
    return (
        int(spent) / NANO if spent is not None else float("nan"),
        int(held) / NANO if held is not None else 0.0,
    )


def _until(condition: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


def _load(url: str, stop: threading.Event, whole: list[str]) -> None:
    """Stream requests one after another until stopped; note those that arrived whole."""
    with httpx.Client(timeout=10) as client:
        while not stop.is_set():
            with client.stream(
                "POST",
                f"{url}/v1/chat/completions",
                json={"model": MODEL, "messages": HELLO, "max_tokens": 60, "stream": True},
            ) as response:
                body = b"".join(response.iter_bytes())
                if body.rstrip().endswith(b"data: [DONE]"):
                    whole.append(response.headers["x-rungway-request-id"])
                else:
                    time.sleep(0.05)  # refused while Redis is away: no need to spin


def test_a_release_that_overtakes_its_reserve_leaves_nothing_held(redis_prefix: str) -> None:
    async def run() -> None:
        async with shared_budget(redis_prefix, Ledger()) as (budget, link):
            assert isinstance(await budget.reserve(Rung.CHEAP, None, 0.1, NOW), Reservation)
            client = link.client
            start = int(period_start("month", NOW))
            account = [
                f"{redis_prefix}:budget:{kind}:rung:cheap{suffix}"
                for kind, suffix in (("spent", f":{start}"), ("holds", ""), ("reserved", ""))
            ]
            token = f"{redis_prefix}:budget:hold:77"
            member = f"77:{nano(0.5)}"
            release: list[str | int] = ["release", member, 60, repr(NOW), "", 0]
            assert await client.register_script(APPLY)([token, *account], release) == 1
            reserve: list[str | int] = [repr(NOW), repr(NOW + 60), nano(0.5), member, 60, nano(1)]
            assert await client.register_script(RESERVE)([*account, token], reserve) == [
                GIVEN_BACK,
                0,
            ]
            await budget.refresh(NOW)
            assert budget.rung_spend(NOW)[Rung.CHEAP].reserved_usd == pytest.approx(0.1)

    asyncio.run(run())
