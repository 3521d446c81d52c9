"""Waits that beat paying: an `auto` request held for a plan's reset a few seconds away.

When the ladder's best route for an `auto/thrifty` request is a paid rung (or there is no
route at all), while a plan connection that serves it is kept off only by a spent window
or a cooldown that ends within `ladder.max_wait_s`, the request is held until that
moment (plus `WAKE_MARGIN_S`) and planned again: the plan serves it and nothing is paid.
`auto/subscription` waits the same way instead of refusing. A request is held once: if
the plan still cannot serve it after the reset (another window binds), it goes on as
planned then. `max_wait_s` 0 turns waits off.

The wait reads the injected clock (`rungway.clock`), so a test or a replay that moves the
clock ends it. A client that hangs up while held ends it too, before anything was held
against a budget or written to the ledger: the request never happened. A held request
that is served has its wait noted in its route plan (`waited_s`), which `explain` shows.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Final

import orjson

from rungway.clock import Clock
from rungway.engine.call import Refusal
from rungway.routing.autoid import Ladder
from rungway.routing.settings import LadderSettings

if TYPE_CHECKING:
    # The planner holds requests through this module: the plan's type only, to type it.
    from rungway.engine.planning import Plan

WAKE_MARGIN_S: Final = 0.5
"""How long after the reset a held request is planned again: an upstream's counters turn
over a moment after the instant it announced (its resets are whole seconds), and a plan
asked too early refuses again and sends the request up the ladder to pay."""
_STEP_S: Final = 0.05
"""How often a held request looks at the clock: a moved test clock ends the wait this soon."""
_SLACK_S: Final = 1.0
"""Wall-clock time a wait may take past its length, for a clock that does not move."""

Gone = Callable[[], Awaitable[object]]
"""Returns once the client has hung up (never, while it stays)."""
Replan = Callable[[], Awaitable["Plan | Refusal"]]
"""Plans the request again (re-reading plans' usage first where the ladder needs it)."""


class LeftWhileWaiting(Exception):
    """The client hung up while its request was held: nothing was held or recorded."""


def reset_to_wait_for(plan: Plan, settings: LadderSettings, now: float) -> float | None:
    """The plan's reset to hold the request for, or None when it should go on now.

    Only an `auto` plan waits, only for a reset within `max_wait_s`, and only when waiting
    spares something: thrifty's best route is paid or missing, subscription has none."""
    route_plan = plan.route_plan
    reset = route_plan.earliest_reset
    if (
        settings.max_wait_s <= 0
        or route_plan.ladder is None
        or reset is None
        or not now < reset <= now + settings.max_wait_s
    ):
        return None
    if route_plan.ladder is Ladder.SUBSCRIPTION:
        return reset if not plan.routes and route_plan.subscription_exhausted else None
    best = route_plan.candidates[0] if route_plan.candidates else None
    return reset if best is None or best.rung.paid else None


def noted(plan: Plan, waited_s: float) -> Plan:
    """`plan` with the seconds its request was held written into its stored route plan."""
    data = orjson.loads(plan.route_plan_json)
    data["waited_s"] = round(waited_s, 3)
    return replace(plan, route_plan_json=orjson.dumps(data))


class ResetWaits:
    """Holds `auto` requests for a plan's reset, by the injected clock."""

    def __init__(self, clock: Clock, settings: LadderSettings) -> None:
        self._clock = clock
        self._settings = settings

    async def held(self, planned: Plan | Refusal, gone: Gone, replan: Replan) -> Plan | Refusal:
        """`planned`, or after a wait for a plan's reset, the request planned again.

        Raises `LeftWhileWaiting` when the client hangs up during the wait."""
        if isinstance(planned, Refusal):
            return planned
        start = self._clock.now()
        reset = reset_to_wait_for(planned, self._settings, start)
        if reset is None:
            return planned
        if not await self._until(reset + WAKE_MARGIN_S, gone):
            raise LeftWhileWaiting
        again = await replan()
        if isinstance(again, Refusal):
            return again
        return noted(again, self._clock.now() - start)

    async def _until(self, instant: float, gone: Gone) -> bool:
        """Sleep until the clock reads `instant`; False if the client hung up first."""
        sleeper = asyncio.ensure_future(self._sleep_until(instant))
        watcher = asyncio.ensure_future(gone())
        try:
            done, _ = await asyncio.wait((sleeper, watcher), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, watcher):
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
        return sleeper in done and watcher not in done

    async def _sleep_until(self, instant: float) -> None:
        loop = asyncio.get_running_loop()
        # Bounded in wall time too: a clock nobody moves must not hold a request forever.
        deadline = loop.time() + max(0.0, instant - self._clock.now()) + _SLACK_S
        while True:
            left = instant - self._clock.now()
            if left <= 0 or loop.time() >= deadline:
                return
            await asyncio.sleep(min(left, _STEP_S))
