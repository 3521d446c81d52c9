"""Waits that beat paying, and refusals whose wait is the earliest route's: which plans hold
their request for a reset, how the hold ends (the clock, or the client hanging up), and
the wait a budget or give-up refusal states."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from rungway.budget import Shortfall
from rungway.clock import FakeClock
from rungway.engine.call import Refusal
from rungway.engine.giving_up import every_attempt_failed
from rungway.engine.planning import Plan
from rungway.engine.record import Attempt
from rungway.engine.spending import over_budget
from rungway.engine.waiting import (
    WAKE_MARGIN_S,
    LeftWhileWaiting,
    ResetWaits,
    noted,
    reset_to_wait_for,
)
from rungway.protocol.errors import LONGEST_CLIENT_WAIT_S, refusal_headers
from rungway.routing.autoid import Ladder
from rungway.routing.plan import Candidate, RoutePlan
from rungway.routing.resolve import Resolution
from rungway.routing.rungs import Rung
from rungway.routing.settings import LadderSettings

NOW = 1_790_000_000.0
SETTINGS = LadderSettings(max_wait_s=5.0)


def plan(
    ladder: Ladder | None,
    first: Rung | None,
    reset_in: float | None,
    *,
    exhausted: bool = True,
) -> Plan:
    """A plan whose best candidate is on `first` (None: no candidate), with a plan
    connection resetting in `reset_in` seconds."""
    candidates = () if first is None else (Candidate("p", "m", first, ("c",)),)
    route_plan = RoutePlan(
        "auto/x" if ladder else "m",
        ladder,
        None,
        candidates,
        (),
        earliest_reset=None if reset_in is None else NOW + reset_in,
        subscription_exhausted=exhausted,
    )
    resolution = Resolution("auto/x", "auto/x", ())
    # Routes are what the engine tries; only their presence matters to a wait.
    routes: list[object] = [] if first is None else [object()]
    return Plan.of(resolution, routes, route_plan)  # type: ignore[arg-type]


# --- Which plans wait ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ladder", "first", "reset_in", "waits"),
    [
        (Ladder.THRIFTY, Rung.PREMIUM, 3.0, True),  # would pay: wait instead
        (Ladder.THRIFTY, Rung.CHEAP, 5.0, True),  # exactly max_wait_s away
        (Ladder.THRIFTY, None, 2.0, True),  # nothing else serves
        (Ladder.THRIFTY, Rung.PREMIUM, 5.01, False),  # beyond max_wait_s: pay
        (Ladder.THRIFTY, Rung.FREE, 2.0, False),  # a free route costs nothing: no wait
        (Ladder.THRIFTY, Rung.SUBSCRIPTION, 2.0, False),  # a plan serves now
        (Ladder.THRIFTY, Rung.PREMIUM, None, False),  # no plan to wait for
        (Ladder.THRIFTY, Rung.PREMIUM, 0.0, False),  # the reset is now: plan, don't wait
        (Ladder.SUBSCRIPTION, None, 4.0, True),  # waits instead of refusing
        (Ladder.SUBSCRIPTION, None, 60.0, False),  # refused with its retry-after
        (None, Rung.PREMIUM, 2.0, False),  # a named model never waits
    ],
)
def test_which_plans_hold_their_request(
    ladder: Ladder | None, first: Rung | None, reset_in: float | None, waits: bool
) -> None:
    reset = reset_to_wait_for(plan(ladder, first, reset_in), SETTINGS, NOW)
    assert reset == (NOW + reset_in if waits and reset_in is not None else None)


def test_subscription_waits_only_for_a_spent_plan() -> None:
    # Stale or unknown readings are no reset to wait for.
    unverified = plan(Ladder.SUBSCRIPTION, None, 2.0, exhausted=False)
    assert reset_to_wait_for(unverified, SETTINGS, NOW) is None


def test_max_wait_zero_turns_waits_off() -> None:
    off = LadderSettings(max_wait_s=0.0)
    assert reset_to_wait_for(plan(Ladder.THRIFTY, Rung.PREMIUM, 0.5), off, NOW) is None


def test_a_noted_plan_keeps_its_route_plan_and_adds_the_wait() -> None:
    held = plan(Ladder.THRIFTY, None, 2.0)
    data = orjson.loads(noted(held, 2.51234).route_plan_json)
    assert data == {**orjson.loads(held.route_plan_json), "waited_s": 2.512}


# --- How a hold ends -------------------------------------------------------------------------


async def _never() -> None:
    await asyncio.Event().wait()


def test_a_hold_ends_when_the_clock_passes_the_reset_and_replans() -> None:
    asyncio.run(_a_hold_ends_when_the_clock_passes_the_reset_and_replans())


async def _a_hold_ends_when_the_clock_passes_the_reset_and_replans() -> None:
    clock = FakeClock(NOW)
    waits = ResetWaits(clock, SETTINGS)
    replanned = plan(Ladder.THRIFTY, Rung.SUBSCRIPTION, None)

    async def replan() -> Plan | Refusal:
        assert clock.now() >= NOW + 3.0 + WAKE_MARGIN_S, "planned again only after the reset"
        return replanned

    task = asyncio.create_task(waits.held(plan(Ladder.THRIFTY, Rung.PREMIUM, 3.0), _never, replan))
    await asyncio.sleep(0.2)
    assert not task.done(), "held while the clock stands before the reset"
    clock.advance(3.0 + WAKE_MARGIN_S)
    served = await asyncio.wait_for(task, 2.0)
    assert isinstance(served, Plan)
    assert served.routes == replanned.routes
    assert orjson.loads(served.route_plan_json)["waited_s"] == 3.0 + WAKE_MARGIN_S


def test_a_plan_that_need_not_wait_is_returned_at_once() -> None:
    asyncio.run(_a_plan_that_need_not_wait_is_returned_at_once())


async def _a_plan_that_need_not_wait_is_returned_at_once() -> None:
    waits = ResetWaits(FakeClock(NOW), SETTINGS)

    async def replan() -> Plan | Refusal:
        raise AssertionError("not planned again")

    far = plan(Ladder.THRIFTY, Rung.PREMIUM, 60.0)
    assert await waits.held(far, _never, replan) is far
    refusal = Refusal(404, "no such model")
    assert await waits.held(refusal, _never, replan) is refusal


def test_a_client_hanging_up_ends_the_hold_without_planning_again() -> None:
    asyncio.run(_a_client_hanging_up_ends_the_hold_without_planning_again())


async def _a_client_hanging_up_ends_the_hold_without_planning_again() -> None:
    waits = ResetWaits(FakeClock(NOW), SETTINGS)
    hung_up = asyncio.Event()
    replans = 0

    async def replan() -> Plan | Refusal:
        nonlocal replans
        replans += 1
        return plan(Ladder.THRIFTY, Rung.SUBSCRIPTION, None)

    async def gone() -> None:
        await hung_up.wait()

    task = asyncio.create_task(waits.held(plan(Ladder.THRIFTY, None, 4.0), gone, replan))
    await asyncio.sleep(0.1)
    hung_up.set()
    with pytest.raises(LeftWhileWaiting):
        await asyncio.wait_for(task, 2.0)
    assert replans == 0


def test_a_clock_nobody_moves_holds_no_longer_than_the_wait_in_wall_time() -> None:
    asyncio.run(_a_clock_nobody_moves_holds_no_longer_than_the_wait_in_wall_time())


async def _a_clock_nobody_moves_holds_no_longer_than_the_wait_in_wall_time() -> None:
    waits = ResetWaits(FakeClock(NOW), LadderSettings(max_wait_s=0.2))

    async def replan() -> Plan | Refusal:
        return Refusal(429, "still spent", retry_after_s=1.0)

    loop = asyncio.get_running_loop()
    started = loop.time()
    answer = await waits.held(plan(Ladder.SUBSCRIPTION, None, 0.2), _never, replan)
    assert isinstance(answer, Refusal)
    assert loop.time() - started < 0.2 + WAKE_MARGIN_S + 1.5


# --- The wait a refusal states ---------------------------------------------------------------


def shortfall(resets_in: float, account: str = "rung") -> Shortfall:
    return Shortfall(account, "premium", 10.0, "day", NOW + resets_in)  # type: ignore[arg-type]


def test_a_budget_refusal_states_a_plans_sooner_reset() -> None:
    refusal = over_budget([shortfall(37_252.0)], NOW, plan_reset_at=NOW + 144.0)
    assert refusal.retry_after_s == pytest.approx(144.0)
    assert "usable again sooner" in refusal.message


def test_a_budget_refusal_keeps_its_own_reset_when_it_comes_first() -> None:
    refusal = over_budget([shortfall(600.0)], NOW, plan_reset_at=NOW + 3_600.0)
    assert refusal.retry_after_s == pytest.approx(600.0)
    assert "sooner" not in refusal.message
    assert over_budget([shortfall(600.0)], NOW).retry_after_s == pytest.approx(600.0)


def test_a_client_keys_budget_refusal_also_states_the_plans_sooner_reset() -> None:
    refusal = over_budget([shortfall(86_000.0, "key")], NOW, plan_reset_at=NOW + 30.0)
    assert refusal.retry_after_s == pytest.approx(30.0)


def test_a_give_up_states_the_plans_reset_when_it_beats_the_upstreams_wait() -> None:
    held = plan(Ladder.THRIFTY, Rung.PREMIUM, 90.0)
    attempts = [Attempt("k", "rate_limited", 429, 1.0, "throttle: slow")]
    refusal = every_attempt_failed(attempts, held, 3_600.0, NOW)
    assert refusal.status == 429
    assert refusal.retry_after_s == pytest.approx(90.0)
    assert refusal.message.endswith("retry after 90s")
    sooner = every_attempt_failed(attempts, held, 12.0, NOW)
    assert sooner.retry_after_s == pytest.approx(12.0)


@pytest.mark.parametrize(
    ("wait", "expected"),
    [
        (None, {}),
        (0.2, {"retry-after": "1", "retry-after-ms": "200"}),
        (30.0000001, {"retry-after": "30", "retry-after-ms": "30000"}),
        (30.4, {"retry-after": "31", "retry-after-ms": "30400"}),
        (LONGEST_CLIENT_WAIT_S, {"retry-after": "60", "retry-after-ms": "60000"}),
        (
            144.0,
            {"retry-after": "144", "retry-after-ms": "144000", "x-should-retry": "false"},
        ),
    ],
)
def test_refusal_headers_never_say_retry_before_the_moment_nor_sleep_past_a_minute(
    wait: float | None, expected: dict[str, str]
) -> None:
    assert dict(refusal_headers(wait)) == expected
