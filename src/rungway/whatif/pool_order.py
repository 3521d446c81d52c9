"""Sticky round-robin over a pool's accounts: the baseline other gateways use.

The pool strategies themselves (`ladder.pool_strategy`) and session pins are the served
planner's (`routing/pools.py`, `engine/pins.py`); a replay sets them in the config. Sticky
round-robin is not a setting of this gateway, so the replay orders the walk itself: the
accounts of a pool (the plan routes of one provider and model, as the ladder gives them in
one candidate) in turn, the one whose turn it is first, switching after `ROUND_ROBIN_USES`
requests. An account the ladder did not admit (spent, resting) is not in the walk; the
next in turn goes first instead. No pins: round-robin keeps no session anywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from rungway.engine.planning import Route
from rungway.routing.rungs import Rung

__all__ = ["ROUND_ROBIN_USES", "RoundRobin"]

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

    def order(self, routes: Sequence[Route]) -> list[Route]:
        """`routes` with each pool's accounts rotated to the one whose turn it is."""
        ordered: list[Route] = []
        start = 0
        while start < len(routes):
            stop = start + 1
            key = _pool_key(routes[start])
            while key is not None and stop < len(routes) and _pool_key(routes[stop]) == key:
                stop += 1
            group = list(routes[start:stop])
            if key is not None and len(group) > 1:
                group = self._rotated(key, group)
            ordered.extend(group)
            start = stop
        return ordered

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


def _pool_key(route: Route) -> tuple[str, str] | None:
    """Routes of one pool share this key; None for a route outside any pool."""
    if route.rung is not Rung.SUBSCRIPTION:
        return None
    return route.connection.provider, route.target.model
