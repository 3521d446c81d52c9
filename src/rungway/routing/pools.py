"""Pools: the accounts of one plan and one owner, ordered by `ladder.pool_strategy`.

A candidate of the ladder holds every admitted connection of its (provider, model) on its
rung, in config order. Among them, the connections of one plan (provider and billing
catalog entry) and one owner (`RosterConnection.owner`) form a pool, and a pool of plan
connections (subscription billing) is ordered by the strategy:

- `fill_first`: config order; the first account serves until it is spent.
- `soonest_reset`: spend the quota that expires first: the account whose binding window
  (the window in play with the least left) resets soonest goes first, ties by headroom.
- `headroom`: the account with the most left in its binding window goes first.
- `expiry_first`: the account that must burn fastest not to leave quota unused at its
  resets goes first. Each window in play that names a reset needs its remaining percent
  over its seconds to reset; the account's urgency is the lowest of these, since burning
  faster than that runs its scarcest window dry before it resets. Ties by headroom.

A window in play is an account-wide one, or one scoped to the candidate's model, with a
used share read. One whose reset has passed counts as unspent, its next reset unknown (a
new window starts at zero). An account with no window in play (unread) goes after every
read one under the three quota strategies, so a blind guess never outranks a reading;
among themselves, and when all are unread, accounts keep config order. Metered, keyless
and free connections keep config order under every strategy: they have no quota to waste.

A session's pin (`RouteRequest.pinned`) puts that connection first within its pool when it
is among the candidate's kept connections (admitted: not exhausted, not resting); nothing
else moves. Each pool keeps the candidate's positions of its members, so connections of
other pools (another owner, another plan) stay where they were, and `fill_first` without
a pin is exactly the config order.

`order_pool` is the plain function (what-if replays call it); the ladder makes one
`PoolOrder` per decision, and only when a pin or a plan pool of several accounts gives it
work (`decision_order`). What an account's state yields for ranking is kept with the
roster (`PoolIndex`) until that state is replaced or one of its windows resets, so a
decision ranks an account with a few lookups (and, under `expiry_first`, a division per
window).
"""

from __future__ import annotations

from collections.abc import Mapping
from math import inf

from rungway.routing.billing import BillingClass
from rungway.routing.settings import PoolStrategyName
from rungway.routing.snapshot import ConnectionState, Roster, WindowStatus

Rank = tuple[float, float, float]
"""(unread, primary, secondary): lower goes first."""

_UNREAD: Rank = (1.0, 0.0, 0.0)
_NONE_POOL = -1
"""The pool of a connection the roster does not know (or of every one, without a roster)."""


class PoolIndex:
    """What pools derive from a roster once: each connection's pool and which pools are
    plans, kept in `roster.derived`; and each account's state as ranking last read it."""

    __slots__ = ("crowded", "kept", "plan_ids", "plan_pools", "pool_of")

    def __init__(self, roster: Roster) -> None:
        numbers: dict[tuple[str, str, str | None], int] = {}
        sizes: dict[int, int] = {}
        self.pool_of: dict[str, int] = {}
        """Each connection's pool, as a small number."""
        plans: set[int] = set()
        for connection in roster.connections.values():
            key = (connection.provider, connection.billing.entry, connection.owner)
            number = numbers.setdefault(key, len(numbers))
            self.pool_of[connection.id] = number
            sizes[number] = sizes.get(number, 0) + 1
            if connection.billing.billing is BillingClass.SUBSCRIPTION:
                plans.add(number)
        self.plan_pools: frozenset[int] = frozenset(plans)
        """The pools of plan connections: the strategy orders only these."""
        self.plan_ids = frozenset(c for c, number in self.pool_of.items() if number in plans)
        """The plan connections."""
        self.crowded = any(sizes[number] > 1 for number in plans)
        """Some plan pool holds more than one account: without one, no strategy has work."""
        self.kept: dict[str, dict[str, _Kept]] = {}
        """Per strategy, each account's state as it last ranked it."""

    @staticmethod
    def of(roster: Roster) -> PoolIndex:
        """The index of `roster`, built on first use."""
        index = roster.derived.get(PoolIndex)
        if not isinstance(index, PoolIndex):
            index = PoolIndex(roster)
            roster.derived[PoolIndex] = index
        return index


class PoolOrder:
    """Orders the pools of one decision: one strategy, one snapshot's states, one instant.

    Each account's summary (and, where it holds, its rank) is kept with the roster across
    decisions until its state changes, so ranking costs a few lookups per account."""

    __slots__ = ("_fill", "_index", "_kept", "_now", "_states", "strategy")

    def __init__(
        self,
        strategy: PoolStrategyName,
        states: Mapping[str, ConnectionState],
        now: float,
        roster: Roster | None = None,
    ) -> None:
        self.strategy = strategy
        self._fill = strategy == "fill_first"
        self._states = states
        self._now = now
        self._index = PoolIndex.of(roster) if roster is not None else None
        kept = self._index.kept if self._index is not None else {}
        self._kept = kept.setdefault(strategy, {})

    def needed(self, pinned: str | None) -> bool:
        """Whether any candidate could change order: a pin, or a strategy with a plan pool
        of several accounts to order."""
        if pinned is not None:
            return True
        return not self._fill and (self._index is None or self._index.crowded)

    def order(
        self, ids: tuple[str, ...], pinned: str | None = None, model: str | None = None
    ) -> tuple[str, ...]:
        """`ids` (one candidate's kept connections) with each pool in the strategy's order
        and the pin first within its pool; `model` selects the model-scoped windows."""
        if len(ids) < 2:
            return ids
        index = self._index
        if (pinned is None or pinned not in ids) and (
            self._fill or (index is not None and index.plan_ids.isdisjoint(ids))
        ):
            return ids  # no pin to honour, and no plan account to order
        if index is None:
            return tuple(self._order_members(list(ids), True, pinned, model))
        pool_of = index.pool_of
        first = pool_of.get(ids[0], _NONE_POOL)
        if all(pool_of.get(c, _NONE_POOL) == first for c in ids):
            plan = first == _NONE_POOL or first in index.plan_pools
            return tuple(self._order_members(list(ids), plan, pinned, model))
        # Several pools in one candidate: each is ordered within the positions it holds.
        positions: dict[int, list[int]] = {}
        for at, connection_id in enumerate(ids):
            positions.setdefault(pool_of.get(connection_id, _NONE_POOL), []).append(at)
        ordered = list(ids)
        for pool, held in positions.items():
            plan = pool == _NONE_POOL or pool in index.plan_pools
            members = self._order_members([ids[at] for at in held], plan, pinned, model)
            for at, connection_id in zip(held, members, strict=True):
                ordered[at] = connection_id
        return tuple(ordered)

    def _order_members(
        self, members: list[str], plan: bool, pinned: str | None, model: str | None
    ) -> list[str]:
        if plan and not self._fill and len(members) > 1:
            rank = self.rank
            # The position breaks ties: equal ranks (all unread, say) keep config order.
            keyed = [(rank(c, model), at, c) for at, c in enumerate(members)]
            keyed.sort()
            members = [connection_id for _, _, connection_id in keyed]
        if pinned is not None and members[0] != pinned and pinned in members:
            members.remove(pinned)
            members.insert(0, pinned)
        return members

    def rank(self, connection_id: str, model: str | None = None) -> Rank:
        """The connection's place under the strategy (lower first)."""
        state = self._states.get(connection_id)
        if state is None or not state.windows:
            return _UNREAD
        now = self._now
        kept = self._kept.get(connection_id)
        if kept is None or kept.state is not state or not kept.valid_from <= now < kept.valid_until:
            kept = self._kept[connection_id] = _Kept(state, self.strategy, now)
        if model is None or model not in kept.scoped:
            # The common case: the account's own rank (no window scoped to the model).
            found = kept.plain
            return found if found is not None else _rank_of(kept.summary, self.strategy, now)
        return kept.rank(model, now)


class _Kept:
    """One account's state as one strategy last ranked it, kept across decisions: a state
    is immutable and replaced when a reading changes, so what is derived from it holds
    until then, or until one of its windows resets. Under `headroom` and `soonest_reset`
    that includes the rank; `expiry_first`'s moves with the clock."""

    __slots__ = (
        "plain",
        "ranks",
        "scoped",
        "state",
        "strategy",
        "summaries",
        "summary",
        "valid_from",
        "valid_until",
    )

    def __init__(self, state: ConnectionState, strategy: PoolStrategyName, now: float) -> None:
        self.state = state
        self.strategy = strategy
        self.scoped = frozenset(w.model for w in state.windows if w.model is not None)
        # Between the last reset passed and the next one ahead, every window stays on its
        # side of its reset, and so does the summary.
        resets = [w.resets_at for w in state.windows if w.resets_at is not None]
        self.valid_from = max((at for at in resets if at <= now), default=-inf)
        self.valid_until = min((at for at in resets if at > now), default=inf)
        self.summary = _summarise(state, now, None)
        self.plain = None if strategy == "expiry_first" else _rank_of(self.summary, strategy, now)
        self.summaries: dict[str, _Summary] = {}
        self.ranks: dict[str, Rank] = {}

    def rank(self, model: str, now: float) -> Rank:
        """The rank for `model`, whose own windows count too."""
        found = self.ranks.get(model)
        if found is not None:
            return found
        summary = self.summaries.get(model)
        if summary is None:
            summary = self.summaries[model] = _summarise(self.state, now, model)
        found = _rank_of(summary, self.strategy, now)
        if self.plain is not None:
            self.ranks[model] = found
        return found


_Summary = tuple[float | None, float, tuple[tuple[float, float], ...]]
"""An account's windows in play, as ranking reads them: (the binding window's remaining
percent or None when unread, its reset or inf, each (remaining, reset) naming a reset)."""


def _summarise(state: ConnectionState, now: float, model: str | None) -> _Summary:
    least: float | None = None  # the binding window's remaining percent
    least_reset = inf  # and its reset (inf: unknown)
    timed: list[tuple[float, float]] = []
    for window in state.windows:
        used = window.used_percent
        if used is None or (window.model is not None and window.model != model):
            continue
        resets_at = window.resets_at
        if resets_at is not None and resets_at <= now:
            # Over: a new window started unspent, its reset not yet read.
            remaining, reset = 100.0, inf
        else:
            if window.status is WindowStatus.REJECTED:
                remaining = 0.0
            else:
                remaining = min(100.0, max(0.0, 100.0 - used))
            reset = inf if resets_at is None else resets_at
            if resets_at is not None:
                timed.append((remaining, resets_at))
        if least is None or remaining < least or (remaining == least and reset < least_reset):
            least, least_reset = remaining, reset
    return (least, least_reset, tuple(timed))


def _rank_of(summary: _Summary, strategy: PoolStrategyName, now: float) -> Rank:
    least, least_reset, timed = summary
    if least is None:
        return _UNREAD
    if strategy == "headroom":
        return (0.0, -least, 0.0)
    if strategy == "soonest_reset":
        return (0.0, least_reset, -least)
    if strategy == "expiry_first":
        # The fastest it can burn with no window running dry before its reset; with no
        # window naming a reset nothing expires, so no urgency.
        urgency = inf
        for left, at in timed:
            need = left / (at - now if at - now > 1.0 else 1.0)
            urgency = min(urgency, need)
        return (0.0, 0.0 if urgency == inf else -urgency, -least)
    return (0.0, 0.0, 0.0)


def decision_order(
    strategy: PoolStrategyName,
    states: Mapping[str, ConnectionState],
    now: float,
    roster: Roster | None,
    pinned: str | None,
) -> PoolOrder | None:
    """The `PoolOrder` of one decision, or None when it has no work (no pin, and no plan
    pool of several accounts for the strategy to order), decided before one is built."""
    if pinned is None and (
        strategy == "fill_first" or (roster is not None and not PoolIndex.of(roster).crowded)
    ):
        return None
    return PoolOrder(strategy, states, now, roster)


def pool_rank(
    state: ConnectionState | None, strategy: PoolStrategyName, now: float, model: str | None = None
) -> Rank:
    """An account's place in its pool under `strategy` at `now`: lower goes first."""
    if state is None or not state.windows:
        return _UNREAD
    return _rank_of(_summarise(state, now, model), strategy, now)


def order_pool(
    ids: tuple[str, ...],
    states: Mapping[str, ConnectionState],
    strategy: PoolStrategyName,
    now: float,
    *,
    pinned: str | None = None,
    roster: Roster | None = None,
    model: str | None = None,
) -> tuple[str, ...]:
    """One candidate's connections `ids` with each pool ordered by `strategy` at `now`, the
    pinned connection first within its pool when it is among them.

    Without `roster`, `ids` are taken as one pool of plan accounts."""
    return PoolOrder(strategy, states, now, roster).order(ids, pinned, model)
