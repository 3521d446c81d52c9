"""How a replay orders the accounts of a pool: the pool strategies, session pins and the
sticky round-robin baseline.

A pool here is what the ladder puts in one candidate on the subscription rung: several
plan connections serving one model, walked in order. The served planner orders them by
`ladder.pool_strategy` and the request's pin (`RouteRequest.pinned`); until the routing
core's ordering (`routing/pools.py`) and the engine's pin store land, the replay orders
the walk itself with these stand-ins, reading the same quota board the planner reads:

- `fill_first`: the config's order (the ladder's own until pools).
- `soonest_reset`: the account whose next reset (of any window) comes first.
- `headroom`: the account with the most left in its fullest window.
- `expiry_first`: the account that must burn fastest not to waste quota at its longest
  window's reset: that window's remaining percent over the seconds until it resets.
- `round-robin` (a baseline, not a setting): the accounts in turn, switching after
  `ROUND_ROBIN_USES` requests (sticky round-robin), skipping none the ladder admitted.

An account without a reading goes first under the three quota strategies: one request
reads it. Ties keep the config's order.

With affinity, a session's pin (the account that last served it within `session_ttl_s`)
goes first while the ladder admits it; once it does not (spent, resting), the strategy
picks, and the pin moves to the account that serves: once, not back and forth. A turn
served off the pool (a paid rung, while every account is spent) leaves the pin alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Literal

from rungway.engine.planning import Route
from rungway.routing.rungs import Rung
from rungway.routing.settings import PoolStrategyName
from rungway.routing.snapshot import ConnectionState
from rungway.whatif.trace import TraceRequest

__all__ = ["ROUND_ROBIN_USES", "PoolOrder", "Strategy"]

ROUND_ROBIN_USES: Final = 3
"""Requests an account serves in a row under sticky round-robin before the next takes over."""

Strategy = PoolStrategyName | Literal["round_robin"]
_NO_STATE = ConnectionState()
_UNREAD = float("-inf")


class PoolOrder:
    """Orders each pool in a request's routes, and remembers pins and round-robin turns."""

    __slots__ = ("_members", "_pins", "_turns", "affinity", "pin_ttl_s", "strategy")

    def __init__(self, strategy: Strategy, *, affinity: bool, pin_ttl_s: float) -> None:
        self.strategy = strategy
        self.affinity = affinity
        self.pin_ttl_s = pin_ttl_s
        self._pins: dict[str, tuple[str, float]] = {}
        self._turns: dict[tuple[str, str], tuple[int, int]] = {}
        """Per pool: whose turn it is (an index into its members), and its uses so far."""
        self._members: dict[tuple[str, str], list[str]] = {}
        """Per pool: every account seen in it, sorted."""

    def pinned(self, request: TraceRequest, now: float) -> str | None:
        """The account `request`'s session is pinned to at `now`, if any."""
        if not self.affinity or request.session is None:
            return None
        pin = self._pins.get(request.session)
        if pin is None or now - pin[1] > self.pin_ttl_s:
            return None
        return pin[0]

    def order(
        self,
        routes: Sequence[Route],
        request: TraceRequest,
        states: Mapping[str, ConnectionState],
        now: float,
    ) -> list[Route]:
        """`routes` with each pool's accounts in the strategy's order, the pin first."""
        pin = self.pinned(request, now)
        ordered: list[Route] = []
        start = 0
        while start < len(routes):
            stop = start + 1
            key = _pool_key(routes[start])
            while key is not None and stop < len(routes) and _pool_key(routes[stop]) == key:
                stop += 1
            group = list(routes[start:stop])
            if len(group) > 1:
                group = self._ordered(group, states, now, pin)
            ordered.extend(group)
            start = stop
        return ordered

    def served(self, request: TraceRequest, route: Route, now: float, pool: bool) -> None:
        """Note that `route` served `request`: its pin, and a round-robin use."""
        if not pool:
            return
        connection_id = route.connection.id
        if self.affinity and request.session is not None:
            self._pins[request.session] = (connection_id, now)

    def _ordered(
        self, group: list[Route], states: Mapping[str, ConnectionState], now: float, pin: str | None
    ) -> list[Route]:
        if self.strategy == "round_robin":
            group = self._round_robin(group)
        elif self.strategy != "fill_first":
            # sorted() is stable: ties keep the config's order.
            group = sorted(
                group, key=lambda r: _rank(self.strategy, states.get(r.connection.id), now)
            )
        if pin is not None:
            first = [route for route in group if route.connection.id == pin]
            group = first + [route for route in group if route.connection.id != pin]
        return group

    def _round_robin(self, group: list[Route]) -> list[Route]:
        key = _pool_key(group[0])
        assert key is not None
        members = self._members.setdefault(key, [])
        if any(route.connection.id not in members for route in group):
            members[:] = sorted({*members, *(route.connection.id for route in group)})
        turn, uses = self._turns.get(key, (0, 0))
        if uses >= ROUND_ROBIN_USES:
            turn, uses = (turn + 1) % len(members), 0
        self._turns[key] = (turn, uses + 1)
        # The account whose turn it is first, then the others in turn after it.
        rotation = {account: (i - turn) % len(members) for i, account in enumerate(members)}
        return sorted(group, key=lambda route: rotation[route.connection.id])


def _pool_key(route: Route) -> tuple[str, str] | None:
    """Routes of one pool share this key; None for a route outside any pool."""
    if route.rung is not Rung.SUBSCRIPTION:
        return None
    return route.connection.provider, route.target.model


def _rank(strategy: Strategy, state: ConnectionState | None, now: float) -> float:
    """Lower goes first."""
    windows = [w for w in (state or _NO_STATE).windows if w.model is None]
    read = [w for w in windows if w.used_percent is not None]
    if not read:
        return _UNREAD
    if strategy == "headroom":
        return max(w.used_percent or 0.0 for w in read)
    resets = [w for w in read if w.resets_at is not None and w.resets_at > now]
    if not resets:
        return _UNREAD  # every window has reset since it was read: as good as unread
    if strategy == "soonest_reset":
        return min(w.resets_at or 0.0 for w in resets)
    longest = max(resets, key=lambda w: w.resets_at or 0.0)
    remaining = 100.0 - (longest.used_percent or 0.0)
    return -remaining / max(1.0, (longest.resets_at or now) - now)
