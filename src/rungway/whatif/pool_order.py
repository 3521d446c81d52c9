"""Pool orders the replay makes itself: sticky round-robin, and one candidate strategy.

The pool strategies themselves (`ladder.pool_strategy`) and session pins are the served
planner's (`routing/pools.py`, `engine/pins.py`); a replay sets them in the config. Two
orders are not settings of this gateway, so the replay orders the walk itself, over the
accounts of a pool (the plan routes of one provider and model, as the ladder gives them in
one candidate); an account the ladder did not admit (spent, resting) is not in the walk:

- `RoundRobin`, the baseline other gateways use: the accounts in turn, the one whose turn
  it is first, switching after `ROUND_ROBIN_USES` requests. No pins: round-robin keeps no
  session anywhere.
- `LongestExpiry`, a candidate for `expiry_first` measured against the served one: rank
  each account by the burn its *longest* window (the one whose leftover expires in bulk,
  the week) needs not to waste quota at its reset (remaining percent over seconds to
  reset), fastest first; an account without a current reading first (one request reads
  it). The served `expiry_first` takes the lowest such rate over every window instead.
  With affinity the session's pin still goes first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from rungway.engine.planning import Route
from rungway.routing.rungs import Rung
from rungway.routing.snapshot import ConnectionState

__all__ = ["ROUND_ROBIN_USES", "LongestExpiry", "RoundRobin", "pinned_first"]

ROUND_ROBIN_USES: Final = 3
"""Requests an account takes in a row under sticky round-robin before the next one's turn."""


class RoundRobin:
    """Each pool's accounts in turn; remembers whose turn it is per pool."""

    __slots__ = ("_members", "_turns")

    def __init__(self) -> None:
        self._turns: dict[tuple[str, str], tuple[int, int]] = {}
        """Per pool: whose turn it is (an index into its members), and its uses so far."""
        self._members: dict[tuple[str, str], list[str]] = {}
        """Per pool: every account seen in it, sorted."""

    def order(
        self, routes: Sequence[Route], states: Mapping[str, ConnectionState], now: float
    ) -> list[Route]:
        """`routes` with each pool's accounts rotated to the one whose turn it is."""
        return _by_pool(routes, self._rotated)

    def _rotated(self, key: tuple[str, str], group: list[Route]) -> list[Route]:
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


class LongestExpiry:
    """Each pool's accounts by the burn their longest window needs, fastest first."""

    __slots__ = ()

    def order(
        self, routes: Sequence[Route], states: Mapping[str, ConnectionState], now: float
    ) -> list[Route]:
        """`routes` with each pool's accounts in this strategy's order (stable on ties)."""

        def ranked(key: tuple[str, str], group: list[Route]) -> list[Route]:
            return sorted(group, key=lambda r: _urgency(states.get(r.connection.id), now))

        return _by_pool(routes, ranked)


def pinned_first(routes: Sequence[Route], pinned: str | None) -> list[Route]:
    """`routes` with the `pinned` account first within its pool, when it is there."""
    if pinned is None:
        return list(routes)

    def first(key: tuple[str, str], group: list[Route]) -> list[Route]:
        return sorted(group, key=lambda route: route.connection.id != pinned)

    return _by_pool(routes, first)


def _by_pool(
    routes: Sequence[Route], order: Callable[[tuple[str, str], list[Route]], list[Route]]
) -> list[Route]:
    """`routes` with each run of one pool's routes put in `order`."""
    ordered: list[Route] = []
    start = 0
    while start < len(routes):
        stop = start + 1
        key = _pool_key(routes[start])
        while key is not None and stop < len(routes) and _pool_key(routes[stop]) == key:
            stop += 1
        group = list(routes[start:stop])
        if key is not None and len(group) > 1:
            group = order(key, group)
        ordered.extend(group)
        start = stop
    return ordered


def _urgency(state: ConnectionState | None, now: float) -> float:
    """Lower goes first: minus the longest window's remaining percent per second to reset."""
    windows = [
        w
        for w in (state.windows if state is not None else ())
        if w.model is None
        and w.used_percent is not None
        and w.resets_at is not None
        and w.resets_at > now
    ]
    if not windows:
        return -math.inf
    longest = max(windows, key=lambda w: w.resets_at or 0.0)
    remaining = 100.0 - (longest.used_percent or 0.0)
    return -remaining / max(1.0, (longest.resets_at or now) - now)


def _pool_key(route: Route) -> tuple[str, str] | None:
    """Routes of one pool share this key; None for a route outside any pool."""
    if route.rung is not Rung.SUBSCRIPTION:
        return None
    return route.connection.provider, route.target.model
