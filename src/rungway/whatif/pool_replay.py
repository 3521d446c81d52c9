"""Pools replayed: a strategy, session affinity, the prompt cache and waits for a reset.

A `PoolPolicy` is the ladder as served (`ReplayGateway`) with its `ladder:` settings set to
one pool strategy, affinity on or off and a `max_wait_s` (the config's, or 0), so that:

- the served planner orders each pool by `ladder.pool_strategy` (`routing/pools.py`) and
  puts a session's pinned account first (`RouteRequest.pinned`); the replay keeps the pins
  in the engine's own store (`engine/pins.py`), each trace session sent as Claude Code's
  session header, and pins a session where a plan served it, as the engine does;
- an `auto` request is held for a plan's reset within `max_wait_s` by the engine's own rule
  (`engine/waiting.reset_to_wait_for`), on the replay's clock, and planned again. A held
  request still arrives in order: the next one is planned at its own time or the held
  one's, the later.

And the replay adds two things the config has no setting for:

- the prompt cache (`prompt_cache.PromptCache`): each route prices the request as it would
  be served there, a cache hit where the session's context lives and a miss elsewhere, and
  a plan's cost window counts what the miss costs;
- `round-robin`, the sticky round-robin baseline (`pool_order.RoundRobin`), and
  `expiry-longest`, a candidate strategy measured against the served ones
  (`pool_order.LongestExpiry`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final, Literal

from rungway.engine.call import Refusal
from rungway.engine.pins import MemoryPins
from rungway.engine.planning import Route
from rungway.engine.waiting import WAKE_MARGIN_S, reset_to_wait_for
from rungway.routing.rungs import Rung
from rungway.routing.settings import PoolStrategyName
from rungway.whatif.outcome import Placement, PolicyRun, World
from rungway.whatif.policies import replay
from rungway.whatif.pool_order import LongestExpiry, RoundRobin, pinned_first
from rungway.whatif.prompt_cache import CACHE_TTL_S, PromptCache
from rungway.whatif.replay import ReplayGateway
from rungway.whatif.trace import Trace, TraceRequest

__all__ = ["POOL_POLICY_NAMES", "PoolGateway", "PoolPolicy", "Strategy", "pool_policy"]

Strategy = PoolStrategyName | Literal["round_robin", "expiry_longest"]
_ORDERS: Final[dict[str, type[RoundRobin | LongestExpiry]]] = {
    "round_robin": RoundRobin,
    "expiry_longest": LongestExpiry,
}
"""The orders the replay makes itself (`pool_order.py`), not the served planner."""

_STRATEGIES: Final[dict[str, Strategy]] = {
    "fill-first": "fill_first",
    "soonest-reset": "soonest_reset",
    "headroom": "headroom",
    "expiry-first": "expiry_first",
    "round-robin": "round_robin",
    "expiry-longest": "expiry_longest",
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
    """A replayed gateway with the served pool order, pins and waits, and a prompt cache."""

    def __init__(
        self,
        world: World,
        *,
        order: RoundRobin | LongestExpiry | None = None,
        cache_ttl_s: float = CACHE_TTL_S,
        start: float = 0.0,
    ) -> None:
        ladder = world.settings.ladder
        pins = MemoryPins(ladder.session_ttl_s) if ladder.session_affinity else None
        super().__init__(world, start=start, pins=pins)
        self.pins = pins
        self.order = order
        self.cache = PromptCache(cache_ttl_s)
        self.cache_counts: list[tuple[int, int]] = []
        self.waits: list[float] = []
        self._session: str | None = None
        self._served: list[TraceRequest] = []
        """The request as served by the last walk's route that served it, if one did."""

    def place(self, index: int, request: TraceRequest) -> Placement:
        """Plan `request`, hold it for a near reset as the engine does, and walk its routes."""
        now = max(request.at, self.clock.now())
        self.clock.set(now)
        plan = self.plan(request)
        if not isinstance(plan, Refusal):
            reset = reset_to_wait_for(plan, self.world.settings.ladder, now)
            if reset is not None:
                until = reset + WAKE_MARGIN_S
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
            self._session = plan.session
            routes = plan.routes
            if self.order is not None:
                states = self._state.connection_states(now)
                routes = self.order.order(routes, states, now)
                if self.pins is not None and plan.session is not None:
                    routes = pinned_first(routes, self.pins.pinned(plan.session, now))
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
        """Move the session's cache to the account that served it, and pin the session
        there when a plan served it, as the engine pins (`engine/trail.py`)."""
        self._served.append(request)
        self.cache.served(request, route.connection.id, now)
        if self.pins is not None and self._session is not None and route.rung is Rung.SUBSCRIPTION:
            self.pins.pin(self._session, route.connection.id, now)


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
        if self.strategy not in _ORDERS:
            changes["pool_strategy"] = self.strategy
        if not self.wait:
            changes["max_wait_s"] = 0.0
        settings = world.settings.model_copy(update={"ladder": ladder.model_copy(update=changes)})
        world = replace(world, settings=settings)
        order = _ORDERS[self.strategy]() if self.strategy in _ORDERS else None
        gateway = PoolGateway(world, order=order, start=trace[0].at if trace else 0.0)
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
