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
from pathlib import Path

import pytest
from redis.exceptions import ResponseError

from rungway.budget import Reservation, Shortfall
from rungway.budget.period import period_start
from rungway.clock import FakeClock
from rungway.cluster.budget import RedisBudget
from rungway.cluster.budget_scripts import APPLY, NANO, RESERVE, nano
from rungway.routing.rungs import Rung
from tests.private_redis import PrivateRedis

from .test_shared_budget import NOW, Ledger, shared_budget

PREFIX = "rw"


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
            busy = server.client()
            sleeper = threading.Thread(target=busy.execute_command, args=("DEBUG", "SLEEP", "1.2"))
            sleeper.start()
            await asyncio.sleep(0.1)
            timed_out = await asyncio.gather(
                *(budget.reserve(Rung.CHEAP, None, 0.1, NOW) for _ in range(8))
            )
            assert not any(isinstance(each, Reservation) for each in timed_out)
            await asyncio.to_thread(sleeper.join)
            busy.close()
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
