"""Budgets shared through the real Redis: several processes, one spend and one set of holds.

Each `RedisBudget` here stands in for a gateway process: a link of its own (and, in the
concurrency test, an event loop on a thread of its own) on the same key prefix.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

import redis

from rungway.budget import BudgetUnavailable, KeyBudget, Reservation, Shortfall
from rungway.budget.local import Grouping, UnrecordedCost
from rungway.budget.period import period_start
from rungway.clock import FakeClock
from rungway.cluster.budget import RedisBudget
from rungway.cluster.budget_changes import PendingChanges
from rungway.cluster.budget_scripts import NANO, nano
from rungway.cluster.link import RedisLink
from rungway.routing.rungs import Rung
from rungway.routing.settings import LadderSettings
from tests.proxy import CuttableProxy
from tests.services import REDIS_URL

NOW = 1_790_000_000.0
CHEAP_1 = LadderSettings(rung_budget_usd={"cheap": 1.0, "premium": None}, reservation_ttl_s=60)


class Ledger:
    """What a ledger would hold: each row's time, rung, client key and cost."""

    def __init__(self, cheap: float = 0.0, *, read_s: float = 0.0) -> None:
        self.rows: list[tuple[float, str, str | None, float]] = []
        self.read_s = read_s
        self.crashed: list[UnrecordedCost] = []
        self._lock = threading.Lock()
        if cheap:
            self.record(Rung.CHEAP, cheap)

    def record(
        self, rung: Rung, cost: float, client_key: str | None = None, at: float = NOW
    ) -> None:
        with self._lock:
            self.rows.append((at, rung.label, client_key, cost))

    def spent_since(self, since: float, by: Grouping) -> dict[str, float]:
        time.sleep(self.read_s)  # a slow read: every process finds the spend missing
        totals: dict[str, float] = {}
        with self._lock:
            for at, rung, client_key, cost in self.rows:
                name = rung if by == "rung" else client_key
                if name is not None and at >= since:
                    totals[name] = totals.get(name, 0.0) + cost
        return totals

    def unrecorded(self, since: float) -> Iterable[UnrecordedCost]:
        return [row for row in self.crashed if row.started_at >= since]


@asynccontextmanager
async def shared_budget(
    prefix: str,
    ledger: Ledger,
    *,
    settings: LadderSettings = CHEAP_1,
    clock: FakeClock | None = None,
    url: str = REDIS_URL,
    keys: tuple[KeyBudget, ...] = (),
    together: threading.Barrier | None = None,
    pending: PendingChanges | None = None,
) -> AsyncIterator[tuple[RedisBudget, RedisLink]]:
    """A started budget on its own link, as a gateway process starts it (at the same
    moment as the other processes waiting on `together`)."""
    link = RedisLink(url, prefix, retry_s=0.1)
    budget = RedisBudget(
        settings,
        link,
        ledger.spent_since,
        clock=clock or FakeClock(NOW),
        keys=keys,
        unrecorded=ledger.unrecorded,
        pending=pending,
        refresh_s=0.1,
    )
    await budget.start()
    if together is not None:
        await asyncio.to_thread(together.wait)
    await link.start()
    try:
        yield budget, link
    finally:
        await budget.close()
        await link.close()


def shared_spend(prefix: str, account: str, start: float) -> float:
    """The settled spend Redis holds for `account` (`rung:cheap`) in the period at `start`."""
    client = redis.Redis.from_url(REDIS_URL)
    try:
        value = client.hget(f"{prefix}:budget:spent:{account}:{int(start)}", "s")
        held = client.get(f"{prefix}:budget:reserved:{account}")
    finally:
        client.close()
    assert held is None or int(held) == 0, "every hold is settled or released"
    return int(value) / NANO if value is not None else float("nan")


async def rejoined(link: RedisLink, budget: RedisBudget) -> None:
    """Wait until the link has joined Redis again and the budget has sent what waited."""
    for _ in range(100):
        if link.up and not budget.pending:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not rejoined: up={link.up}, {budget.pending} changes wait")


def _in_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            results[index] = asyncio.run(work(index))
        except BaseException as error:  # reported below, on the test's thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    return results


def test_three_processes_never_spend_past_one_budget(redis_prefix: str) -> None:
    ledger = Ledger()
    hold = 0.05
    ready = threading.Barrier(3)

    async def process(index: int) -> list[float]:
        settled: list[float] = []
        luck = random.Random(index)
        async with shared_budget(redis_prefix, ledger) as (budget, _):
            await asyncio.to_thread(ready.wait)

            async def request() -> None:
                reservation = await budget.reserve(Rung.CHEAP, None, hold, NOW)
                if not isinstance(reservation, Reservation):
                    assert isinstance(reservation, Shortfall)
                    return
                await asyncio.sleep(luck.random() / 100)
                cost = round(luck.uniform(0.01, hold), 6)
                budget.settle(reservation, cost, NOW)
                settled.append(cost)

            await asyncio.gather(*(request() for _ in range(64)))
            await budget.flush()
        return settled

    costs = [cost for each in _in_threads(3, process) for cost in each]
    spent = shared_spend(redis_prefix, "rung:cheap", period_start("month", NOW))
    assert spent <= 1.0 + hold
    assert round(spent * NANO) == sum(nano(cost) for cost in costs)
    # The budget was the limit, not the requests: most of 192 were refused.
    assert 20 <= len(costs) < 192


def test_settle_and_release_count_once_however_often_they_are_sent(redis_prefix: str) -> None:
    async def run() -> None:
        async with shared_budget(redis_prefix, Ledger()) as (budget, _):
            first = await budget.reserve(Rung.CHEAP, None, 0.4, NOW)
            second = await budget.reserve(Rung.CHEAP, None, 0.4, NOW)
            assert isinstance(first, Reservation)
            assert isinstance(second, Reservation)
            budget.settle(first, 0.1, NOW)
            budget.settle(first, 0.1, NOW)
            budget.release(second)
            budget.release(second)
            budget.release(first)  # already settled: gives nothing back twice
            await budget.flush()
            await budget.refresh(NOW)
            assert budget.rung_spend(NOW)[Rung.CHEAP].spent_usd == 0.1
            assert budget.rung_spend(NOW)[Rung.CHEAP].reserved_usd == 0.0
            # 0.1 spent: 0.9 fits and no more.
            assert isinstance(await budget.reserve(Rung.CHEAP, None, 0.9, NOW), Reservation)
            assert isinstance(await budget.reserve(Rung.CHEAP, None, 0.01, NOW), Shortfall)

    asyncio.run(run())


def test_a_dead_process_holds_expire_for_everyone_and_a_late_settle_counts_once(
    redis_prefix: str,
) -> None:
    async def run() -> None:
        ledger = Ledger()
        async with shared_budget(redis_prefix, ledger) as (dead, _):
            held = await dead.reserve(Rung.CHEAP, None, 0.8, NOW)
            assert isinstance(held, Reservation)
        # The process that held it is gone; the others wait out reservation_ttl_s (60 s).
        async with shared_budget(redis_prefix, ledger) as (alive, _):
            assert isinstance(await alive.reserve(Rung.CHEAP, None, 0.3, NOW + 59), Shortfall)
            late = await alive.reserve(Rung.CHEAP, None, 0.3, NOW + 60)
            assert isinstance(late, Reservation)
            alive.release(late)
            # A settle that arrives after its hold expired still counts its cost, once.
            alive.settle(held, 0.25, NOW + 61)
            alive.settle(held, 0.25, NOW + 61)
            await alive.flush()
        assert shared_spend(redis_prefix, "rung:cheap", period_start("month", NOW)) == 0.25

    asyncio.run(run())


def test_processes_seeding_at_once_seed_the_ledgers_spend_once(redis_prefix: str) -> None:
    ledger = Ledger(cheap=0.4, read_s=0.2)
    together = threading.Barrier(3)

    async def process(index: int) -> None:
        async with shared_budget(redis_prefix, ledger, together=together) as (budget, _):
            assert budget.rung_spend(NOW)[Rung.CHEAP].spent_usd == 0.4

    _in_threads(3, process)
    assert shared_spend(redis_prefix, "rung:cheap", period_start("month", NOW)) == 0.4

    async def after_redis_lost_everything() -> None:
        client = redis.asyncio.Redis.from_url(REDIS_URL)
        async with shared_budget(redis_prefix, ledger) as (budget, _):
            await client.delete(*[key async for key in client.scan_iter(f"{redis_prefix}:*")])
            ledger.record(Rung.CHEAP, 0.2)  # settled elsewhere meanwhile: the ledger has it
            # The reserve finds no spend, seeds it from the ledger and holds against it.
            assert isinstance(await budget.reserve(Rung.CHEAP, None, 0.4, NOW), Reservation)
            assert isinstance(await budget.reserve(Rung.CHEAP, None, 0.01, NOW), Shortfall)
        await client.aclose()

    asyncio.run(after_redis_lost_everything())


def test_a_new_period_starts_from_the_ledger(redis_prefix: str) -> None:
    async def run() -> None:
        async with shared_budget(redis_prefix, Ledger(cheap=0.9)) as (budget, _):
            assert isinstance(await budget.reserve(Rung.CHEAP, None, 0.2, NOW), Shortfall)
            next_month = NOW + 31 * 86_400
            assert isinstance(await budget.reserve(Rung.CHEAP, None, 0.2, next_month), Reservation)

    asyncio.run(run())


def test_without_redis_a_budget_refuses_and_the_queued_settles_land_when_it_returns(
    redis_prefix: str,
) -> None:
    async def run() -> None:
        ledger = Ledger()
        with CuttableProxy(("127.0.0.1", 6379)) as proxy:
            url = f"redis://{proxy.address}/0"
            alice = (KeyBudget("alice", 5.0, "day"),)
            async with shared_budget(redis_prefix, ledger, url=url, keys=alice) as (b, link):
                held = await b.reserve(Rung.CHEAP, None, 0.5, NOW)
                assert isinstance(held, Reservation)
                proxy.cut()
                b.settle(held, 0.3, NOW)
                b.spend(Rung.PREMIUM, None, 0.7, NOW, request_id="r-unbudgeted")
                refused = await b.reserve(Rung.CHEAP, None, 0.1, NOW)
                if not isinstance(refused, BudgetUnavailable):  # the first to find it gone
                    refused = await b.reserve(Rung.CHEAP, None, 0.1, NOW)
                assert refused == BudgetUnavailable("rung", "cheap", f"redis at {proxy.address}")
                assert not link.up
                # No budget on premium without a key: nothing to hold, it serves.
                assert await b.reserve(Rung.PREMIUM, None, 9.0, NOW) is None
                # A budgeted key on an unbudgeted rung needs the store too.
                by_key = await b.reserve(Rung.PREMIUM, "alice", 0.1, NOW)
                assert by_key == BudgetUnavailable("key", "alice", f"redis at {proxy.address}")
                # The settle, the spend, and the release of the reserve that found it gone.
                assert b.pending == 3
                proxy.restore()
                await rejoined(link, b)
        start = period_start("month", NOW)
        assert shared_spend(redis_prefix, "rung:cheap", start) == 0.3
        assert shared_spend(redis_prefix, "rung:premium", start) == 0.7

    asyncio.run(run())


def test_changes_waiting_while_redis_restarted_empty_are_counted_once(
    redis_prefix: str,
) -> None:
    async def run() -> None:
        ledger = Ledger()
        with CuttableProxy(("127.0.0.1", 6379)) as proxy:
            url = f"redis://{proxy.address}/0"
            async with shared_budget(redis_prefix, ledger, url=url) as (budget, link):
                held = await budget.reserve(Rung.CHEAP, None, 0.5, NOW)
                assert isinstance(held, Reservation)
                proxy.cut()
                # Their rows are written as they are queued.
                budget.settle(held, 0.3, NOW)
                ledger.record(Rung.CHEAP, 0.3)
                budget.spend(Rung.CHEAP, None, 0.05, NOW, request_id="r-no-hold")
                ledger.record(Rung.CHEAP, 0.05)
                await asyncio.sleep(0.2)
                # Redis comes back with nothing: the join seeds from the ledger, which
                # already counts what waited, so sending it adds nothing more.
                emptied = redis.Redis.from_url(REDIS_URL)
                emptied.delete(*emptied.scan_iter(f"{redis_prefix}:*"))
                emptied.close()
                proxy.restore()
                await rejoined(link, budget)
        assert shared_spend(redis_prefix, "rung:cheap", period_start("month", NOW)) == 0.35

    asyncio.run(run())


def test_a_crash_rows_cost_reaches_the_shared_spend_once(redis_prefix: str) -> None:
    ledger = Ledger()
    start = period_start("month", NOW)

    async def run() -> None:
        async with shared_budget(redis_prefix, ledger) as (budget, _):
            held = await budget.reserve(Rung.CHEAP, None, 0.2, NOW)
            assert isinstance(held, Reservation)
            budget.settle(held, 0.1, NOW)
            ledger.record(Rung.CHEAP, 0.1)
        # A process dies holding 0.4; at its restart the ledger has an `unrecorded` row.
        ledger.crashed.append(UnrecordedCost("req-crashed", "cheap", None, 0.4, NOW))
        ledger.record(Rung.CHEAP, 0.4)
        for _ in range(2):  # and restarts twice
            async with shared_budget(redis_prefix, ledger) as (budget, _):
                await budget.flush()

    asyncio.run(run())
    assert shared_spend(redis_prefix, "rung:cheap", start) == 0.5

    async def seeded_after_redis_emptied() -> None:
        emptied = redis.asyncio.Redis.from_url(REDIS_URL)
        await emptied.delete(*[key async for key in emptied.scan_iter(f"{redis_prefix}:*")])
        await emptied.aclose()
        # The seed counts the crash row; the restart's own replay of it then adds nothing.
        async with shared_budget(redis_prefix, ledger) as (budget, _):
            await budget.flush()

    asyncio.run(seeded_after_redis_emptied())
    assert shared_spend(redis_prefix, "rung:cheap", start) == 0.5


class _UnreadableLedger(Ledger):
    def spent_since(self, since: float, by: Grouping) -> dict[str, float]:
        raise OSError("the ledger's disk is gone")


def test_a_budget_whose_spend_cannot_be_seeded_refuses(redis_prefix: str) -> None:
    async def run() -> None:
        async with shared_budget(redis_prefix, _UnreadableLedger()) as (budget, link):
            assert link.up, "a ledger that cannot be read does not keep the link down"
            refused = await budget.reserve(Rung.CHEAP, None, 0.1, NOW)
            # Named as the ledger, not as Redis, which answers.
            assert refused == BudgetUnavailable(
                "rung", "cheap", "the ledger: the ledger's disk is gone"
            )

    asyncio.run(run())
