"""Pools replayed: a strategy, session affinity, the prompt cache and waits for a reset.

A `PoolPolicy` is the ladder as served (`ReplayGateway`) with its `ladder:` settings set to
one pool strategy, affinity on or off and a `max_wait_s`, and three things the replay adds:

- the pools' order and the sessions' pins (`pool_order.PoolOrder`), read from the quota
  board as the planner reads it;
- the prompt cache (`prompt_cache.PromptCache`): each route prices the request as it would
  be served there, a cache hit where the session's context lives and a miss elsewhere, and
  a plan's cost window counts what the miss costs;
- waits: an `auto` request that finds no plan usable while a plan that was skipped for its
  quota (or resting) resets within `max_wait_s` is held until that reset and planned
  again, as the gateway holds it instead of paying or refusing. A held request still
  arrives in order: the next one is planned at its own time or the held one's, the later.

Decided where the issue is silent: a held request is planned again once, at the reset; if
the plan still cannot serve it (another window binds), it goes up the ladder then.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

from rungway.engine.call import Refusal
from rungway.engine.planning import Plan, Route
from rungway.routing.rungs import Rung
from rungway.whatif.outcome import Placement, PolicyRun, World
from rungway.whatif.policies import replay
from rungway.whatif.pool_order import PoolOrder, Strategy
from rungway.whatif.prompt_cache import CACHE_TTL_S, PromptCache
from rungway.whatif.replay import ReplayGateway
from rungway.whatif.trace import Trace, TraceRequest

__all__ = ["POOL_POLICY_NAMES", "PoolGateway", "PoolPolicy", "pool_policy"]

_STRATEGIES: Final[dict[str, Strategy]] = {
    "fill-first": "fill_first",
    "soonest-reset": "soonest_reset",
    "headroom": "headroom",
    "expiry-first": "expiry_first",
    "round-robin": "round_robin",
}
POOL_POLICY_NAMES: Final = (
    "fill-first",
    "fill-first+affinity",
    "soonest-reset+affinity",
    "headroom+affinity",
    "expiry-first+affinity",
    "expiry-first+affinity+no-wait",
    "round-robin",
)
"""The pool policies compared by default: each strategy with affinity, fill-first and
round-robin without, and the default without waits. Any strategy takes `+affinity` and
`+no-wait` (`max_wait_s` 0)."""


class PoolGateway(ReplayGateway):
    """A replayed gateway whose pools are ordered by a strategy, with a prompt cache."""

    def __init__(
        self,
        world: World,
        order: PoolOrder,
        *,
        cache_ttl_s: float = CACHE_TTL_S,
        start: float = 0.0,
    ) -> None:
        super().__init__(world, start=start)
        self.order = order
        self.cache = PromptCache(cache_ttl_s)
        self.max_wait_s = world.settings.ladder.max_wait_s
        self.cache_counts: list[tuple[int, int]] = []
        self.waits: list[float] = []
        self._served: list[TraceRequest] = []
        """The request as served by the last walk's route that served it, if one did."""

    def place(self, index: int, request: TraceRequest) -> Placement:
        """Plan `request`, hold it for a near reset when that saves, and walk its pools in
        the strategy's order."""
        now = max(request.at, self.clock.now())
        self.clock.set(now)
        plan = self.plan(request)
        if not isinstance(plan, Refusal):
            until = self._wait_until(plan, now)
            if until is not None:
                self.waits.append(until - now)
                now = until
                self.clock.set(now)
                plan = self.plan(request)
        self._served.clear()
        if now != request.at:
            # The allowances and the cache read the request's own instant.
            request = replace(request, at=now)
        if isinstance(plan, Refusal):
            placement = Placement(index, None, None, 0.0, 0.0, refusal=plan.code)
        else:
            states = self._state.connection_states(now)
            routes = self.order.order(plan.routes, request, states, now)
            placement = self.walk(index, request, routes, plan, now)
        if not self._served or placement.connection_id is None:
            self.cache_counts.append((0, 0))
        else:
            served = self._served[-1]
            inputs = served.input_tokens + served.cache_read_tokens + served.cache_write_tokens
            self.cache_counts.append((served.cache_read_tokens, inputs))
        return placement

    def as_served(self, request: TraceRequest, route: Route, now: float) -> TraceRequest:
        """`request` with its cache reads written again where its context is not cached."""
        return self.cache.as_served(request, route.connection.id, now)

    def note_served(self, request: TraceRequest, route: Route, now: float) -> None:
        """Move the session's cache and pin to the account that served it."""
        self._served.append(request)
        self.cache.served(request, route.connection.id, now)
        self.order.served(request, route, now, pool=route.connection.id in self.allowances)

    def _wait_until(self, plan: Plan, now: float) -> float | None:
        """When to plan `plan`'s request again: a plan's reset within `max_wait_s`, when
        no plan is among its routes; else None."""
        reset = plan.route_plan.earliest_reset
        if self.max_wait_s <= 0 or reset is None or not now < reset <= now + self.max_wait_s:
            return None
        if any(route.rung is Rung.SUBSCRIPTION for route in plan.routes):
            return None
        return reset


@dataclass(slots=True)
class PoolPolicy:
    """One pool strategy, with or without affinity, with the config's `max_wait_s` or 0."""

    name: str
    strategy: Strategy
    affinity: bool
    wait: bool = True

    def run(self, trace: Trace, world: World, progress: Callable[[int], None]) -> PolicyRun:
        """Replay `trace` with the ladder's pool settings set to this policy's."""
        ladder = world.settings.ladder
        changes: dict[str, object] = {"session_affinity": self.affinity}
        if self.strategy != "round_robin":
            changes["pool_strategy"] = self.strategy
        if not self.wait:
            changes["max_wait_s"] = 0.0
        settings = world.settings.model_copy(update={"ladder": ladder.model_copy(update=changes)})
        world = replace(world, settings=settings)
        order = PoolOrder(self.strategy, affinity=self.affinity, pin_ttl_s=ladder.session_ttl_s)
        gateway = PoolGateway(world, order, start=trace[0].at if trace else 0.0)
        run = replay(self.name, gateway, trace, progress)
        return replace(run, cache=tuple(gateway.cache_counts), waits=tuple(gateway.waits))


def pool_policy(name: str) -> PoolPolicy:
    """The pool policy `name` names (`STRATEGY[+affinity][+no-wait]`); ValueError if none."""
    strategy, *flags = name.split("+")
    if strategy not in _STRATEGIES or len(set(flags)) != len(flags):
        raise ValueError(name)
    if not set(flags) <= {"affinity", "no-wait"}:
        raise ValueError(name)
    return PoolPolicy(
        name, _STRATEGIES[strategy], affinity="affinity" in flags, wait="no-wait" not in flags
    )
