"""The quota board shared through Redis: what one replica learns, the others use.

Each `replica` stands in for one gateway process (its own link, store and board); they
share one prefix of the real Redis.
"""

from __future__ import annotations

import asyncio

from rungway.clock import FakeClock
from rungway.protocol.failures import Failure, FailureClass
from rungway.quota.board import QuotaBoard
from rungway.routing.rungs import Rung
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import QuotaWindow
from tests.integration.cluster_world import eventually, replica
from tests.proxy import CuttableProxy
from tests.unit.routing.builders import connection, route
from tests.unit.routing.builders import window as subscription_window

NOW = 1_790_000_000.0
BAND = LadderSettings(
    exit_cutoff_percent=2,
    reentry_min_remaining_percent=5,
    rung_budget_usd={"cheap": None, "premium": None},
)
ROSTER = [
    connection("plan", models=["m1"]),
    connection("key", "metered-co", "apikey"),
]


def _spent(board: QuotaBoard, now: float) -> bool:
    state = board.connection_states(now).get("plan")
    return state is not None and any(window.was_exhausted for window in state.windows)


def test_a_disable_a_cooldown_and_a_spent_window_reach_the_other_replica_and_a_restart(
    redis_prefix: str,
) -> None:
    async def run() -> None:
        clock = FakeClock(NOW)
        a = await replica(redis_prefix, clock, BAND, name="a")
        b = await replica(redis_prefix, clock, BAND, name="b")
        a.board.disable("api")
        a.board.failed("cheap", Failure(FailureClass.RATE_LIMITED, "slow down", 429, 600.0), NOW)
        a.board.observe("plan", [QuotaWindow("5h", 99.0, NOW + 3600, NOW)], NOW)

        def b_has_all() -> bool:
            states = b.board.connection_states(NOW)
            return {"plan", "api", "cheap"} <= set(states) and _spent(b.board, NOW)

        await eventually(b_has_all)
        states = b.board.connection_states(NOW)
        assert states["api"].disabled
        assert states["cheap"].cooldown_until == NOW + 600
        assert states["cheap"].cooldown_reason.startswith("rate_limited")
        await a.stop()
        await b.stop()

        # Every process restarts: a new one loads the shared state when it joins.
        c = await replica(redis_prefix, clock, BAND, name="c")
        states = c.board.connection_states(NOW + 60)
        assert states["api"].disabled
        assert states["cheap"].cooldown_until == NOW + 600
        assert _spent(c.board, NOW + 60)
        # An enable on the restarted one reaches a fourth.
        c.board.enable("api")
        d = await replica(redis_prefix, clock, BAND, name="d")
        await eventually(lambda: "api" not in d.board.connection_states(NOW + 60))
        await c.stop()
        await d.stop()

    asyncio.run(run())


def test_a_reading_on_one_replica_does_not_undo_a_disable_made_on_another(
    redis_prefix: str,
) -> None:
    async def run() -> None:
        clock = FakeClock(NOW)
        a = await replica(redis_prefix, clock, BAND, name="a")
        b = await replica(redis_prefix, clock, BAND, name="b")
        # Both change the same connection before either hears of the other's change.
        a.board.disable("plan")
        b.board.observe("plan", [QuotaWindow("5h", 40.0, NOW + 3600, NOW)], NOW)

        def both_hold_both(board: QuotaBoard) -> bool:
            state = board.connection_states(NOW).get("plan")
            return state is not None and state.disabled and len(state.windows) == 1

        await eventually(lambda: both_hold_both(a.board) and both_hold_both(b.board))
        await a.stop()
        await b.stop()

    asyncio.run(run())


def test_a_plan_hovering_in_the_band_does_not_flap_across_a_replica_switch_or_a_restart(
    redis_prefix: str,
) -> None:
    async def run() -> None:
        clock = FakeClock(NOW)
        a = await replica(redis_prefix, clock, BAND, name="a")
        b = await replica(redis_prefix, clock, BAND, name="b")
        now = NOW

        def subscription_leads(board: QuotaBoard) -> bool:
            plan = route("auto/thrifty", ROSTER, board.connection_states(now), now=now)
            return plan.candidates[0].rung is Rung.SUBSCRIPTION

        def read(board: QuotaBoard, remaining: float) -> None:
            board.observe(
                "plan", [subscription_window(remaining, resets_in=3600, now=now, age=0)], now
            )

        read(a.board, 10.0)
        assert subscription_leads(a.board)
        read(a.board, 1.5)  # at the cut-off: the plan leaves
        assert not subscription_leads(a.board)
        await eventually(lambda: _spent(b.board, now))
        # The next answers go through B, with the plan hovering between 2% and 5% left.
        for remaining in (3.0, 4.8, 2.5):
            now += 1
            read(b.board, remaining)
            assert not subscription_leads(b.board), f"B took the plan back at {remaining}% left"
        await b.store.flush()
        await a.stop()
        await b.stop()

        # A replica started afterwards remembers too, and so does its next reading.
        c = await replica(redis_prefix, clock, BAND, name="c")
        assert not subscription_leads(c.board)
        now += 1
        read(c.board, 4.0)
        assert not subscription_leads(c.board)
        now += 1
        read(c.board, 6.0)  # above the re-entry level: back to the plan
        assert subscription_leads(c.board)
        await c.stop()

    asyncio.run(run())


def test_changes_made_while_redis_was_away_are_merged_on_its_return(
    redis_prefix: str,
) -> None:
    async def run() -> None:
        clock = FakeClock(NOW)
        proxy = CuttableProxy(("127.0.0.1", 6379))
        a = await replica(redis_prefix, clock, BAND, url=f"redis://{proxy.address}/0", name="a")
        b = await replica(redis_prefix, clock, BAND, name="b")
        assert a.link.up
        proxy.cut()
        await eventually(lambda: not a.link.up)

        # A, cut off, keeps serving on its own readings and keeps what it learns.
        a.board.observe("plan", [QuotaWindow("5h", 99.0, NOW + 3600, NOW)], NOW)
        a.board.disable("cheap")
        assert _spent(a.board, NOW)
        # B, still joined, changes another part of the same connection meanwhile.
        b.board.failed("plan", Failure(FailureClass.RATE_LIMITED, "slow down", 429, 600.0), NOW)
        await asyncio.sleep(0.05)
        assert not _spent(b.board, NOW), "nothing of A's can reach B while A is cut off"

        proxy.restore()
        await eventually(lambda: a.link.up)
        await eventually(lambda: _spent(b.board, NOW))
        await eventually(lambda: b.board.connection_states(NOW).get("cheap") is not None)
        assert b.board.connection_states(NOW)["cheap"].disabled
        # A took up B's change from the time it was away, and kept its own.
        subscription = a.board.connection_states(NOW)["plan"]
        assert subscription.cooldown_until is not None
        assert subscription.windows[0].was_exhausted
        await a.stop()
        await b.stop()
        proxy.cut()

    asyncio.run(run())
