"""Properties of pools in `plan_route` over random worlds, strategies, owners and pins.

The worlds are `test_properties`' (random catalogs, rosters, readings, health, budgets,
needs), with each connection given a random owner, the ladder a random pool strategy and
the request a random pin (a connection of the roster, or one it does not hold). Each world
is also planned fill-first without a pin: the plan as it was before pools, against which
the pooled plan must differ only in the order of each pool's connections.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from rungway.pricing import Tier
from rungway.routing.autoid import Category, Ladder
from rungway.routing.billing import BillingClass, Overage
from rungway.routing.ladder import plan_route
from rungway.routing.plan import Candidate, RoutePlan
from rungway.routing.rungs import Rung
from rungway.routing.settings import PoolStrategyName
from rungway.routing.snapshot import (
    BreakerState,
    ConnectionState,
    QuotaWindow,
    Roster,
    RosterConnection,
    ServedModel,
    Snapshot,
    WindowStatus,
)

from .builders import API, CATALOG
from .test_properties import (
    MODELS,
    World,
    applicable,
    connection_states,
    cooling_down,
    verified_headroom,
    worlds,
)

STRATEGIES: tuple[PoolStrategyName, ...] = (
    "fill_first",
    "soonest_reset",
    "headroom",
    "expiry_first",
)
OWNERS = (None, "ann", "bo")
# Random worlds plan a pool of several accounts in about a third of draws: twice as many
# examples as the other properties take.
POOL_EXAMPLES = settings(deadline=None, max_examples=200)


@dataclass(frozen=True)
class PooledWorld:
    """A world with owners, a strategy and a pin, and the same world fill-first, unpinned."""

    world: World
    baseline: World

    @property
    def pinned(self) -> str | None:
        return self.world.request.pinned

    @property
    def strategy(self) -> PoolStrategyName:
        return self.world.settings.pool_strategy

    def pool(self, connection_id: str) -> tuple[str, str, str | None]:
        connection = self.world.snapshot.roster.connections[connection_id]
        return connection.provider, connection.billing.entry, connection.owner


@st.composite
def pooled_worlds(draw: st.DrawFn, *, ladder: Ladder | None = None) -> PooledWorld:
    world = draw(worlds(ladder=ladder))
    connections = [
        replace(connection, owner=draw(st.sampled_from(OWNERS))) for connection in world.connections
    ]
    # Most worlds hold a single plan per provider: add accounts of the same plans, each
    # with a state of its own, so that pools of several accounts are common.
    states = dict(world.snapshot.states)
    if not any(c.billing.billing is BillingClass.SUBSCRIPTION for c in connections):
        models = draw(st.lists(st.sampled_from(MODELS), min_size=1, max_size=2, unique=True))
        served = tuple(
            ServedModel(model, Rung.SUBSCRIPTION, Tier.CHEAP, None, frozenset(Category))
            for model in models
        )
        plan = RosterConnection(
            "plan", "planned", "oauth", API, CATALOG.classify("planned", "oauth"), served
        )
        connections.append(plan)
        states["plan"] = draw(connection_states(world.now, plan))
    for connection in list(connections):
        if connection.billing.billing is not BillingClass.SUBSCRIPTION:
            continue
        for twin in range(draw(st.integers(1, 3))):
            twin_id = f"{connection.id}-{twin}"
            owner = draw(st.sampled_from([connection.owner, connection.owner, *OWNERS]))
            connections.append(replace(connection, id=twin_id, owner=owner))
            if draw(st.integers(0, 9)):
                states[twin_id] = draw(connection_states(world.now, connection))
    snapshot = Snapshot(Roster(connections), states, world.snapshot.spend)
    ids = [connection.id for connection in connections]
    plans = [c.id for c in connections if c.billing.billing is BillingClass.SUBSCRIPTION]
    pinned = draw(
        st.one_of(
            st.none(),
            st.sampled_from(ids),
            st.sampled_from(plans or ids),
            st.just("not-in-roster"),
        )
    )
    strategy = draw(st.sampled_from(STRATEGIES))
    pooled = World(
        replace(world.request, pinned=pinned),
        world.settings.model_copy(update={"pool_strategy": strategy}),
        snapshot,
        world.now,
    )
    # Its own roster: what a roster keeps between decisions must not leak between the two.
    baseline = World(
        replace(world.request, pinned=None),
        world.settings.model_copy(update={"pool_strategy": "fill_first"}),
        Snapshot(Roster(connections), snapshot.states, snapshot.spend),
        world.now,
    )
    return PooledWorld(pooled, baseline)


def _key(candidate: Candidate) -> tuple[str, str, int]:
    return candidate.provider, candidate.model, candidate.rung


def _plan(world: World) -> RoutePlan:
    return plan_route(world.request, world.settings, world.snapshot, world.now)


@POOL_EXAMPLES
@given(pooled_worlds(ladder=Ladder.SUBSCRIPTION))
def test_subscription_with_pools_and_pins_never_yields_a_connection_that_could_bill(
    pooled: PooledWorld,
) -> None:
    world = pooled.world
    for candidate in _plan(world).candidates:
        for connection_id in candidate.connection_ids:
            connection = world.snapshot.roster.connections[connection_id]
            assert connection.billing.billing is BillingClass.SUBSCRIPTION
            state = world.snapshot.states.get(connection_id)
            assert state is not None, "no reading at all"
            assert state.overage_permitted is not True
            if connection.billing.live_overage:
                assert state.overage_permitted is False
            else:
                assert connection.billing.overage is Overage.HARD_STOP
            assert not cooling_down(state, world.now)
            assert state.breaker is BreakerState.CLOSED
            windows = applicable(state, candidate.model)
            assert windows, "no reading that applies to the model"
            assert all(verified_headroom(w, world) for w in windows)


@POOL_EXAMPLES
@given(pooled_worlds())
def test_pools_and_pins_never_put_a_candidate_before_one_of_a_lower_rung(
    pooled: PooledWorld,
) -> None:
    rungs = [candidate.rung for candidate in _plan(pooled.world).candidates]
    assert rungs == sorted(rungs)


@POOL_EXAMPLES
@given(pooled_worlds())
def test_pools_only_reorder_each_candidates_kept_connections_within_their_pools(
    pooled: PooledWorld,
) -> None:
    plan, baseline = _plan(pooled.world), _plan(pooled.baseline)
    # The same candidates in the same order: neither a strategy nor a pin moves one.
    assert [_key(c) for c in plan.candidates] == [_key(c) for c in baseline.candidates]
    roster_order = list(pooled.world.snapshot.roster.connections)
    for pooled_candidate, kept in zip(plan.candidates, baseline.candidates, strict=True):
        ids, before = pooled_candidate.connection_ids, kept.connection_ids
        assert sorted(ids) == sorted(before), "a permutation of the kept connections"
        assert list(before) == sorted(before, key=roster_order.index), "fill-first: config order"
        # Each pool holds the places it held: connections change places only with their own.
        assert [pooled.pool(c) for c in ids] == [pooled.pool(c) for c in before]
    if pooled.strategy == "fill_first" and pooled.pinned is None:
        assert plan == baseline


@POOL_EXAMPLES
@given(pooled_worlds())
def test_a_usable_pinned_connection_is_first_in_its_pool(pooled: PooledWorld) -> None:
    plan = _plan(pooled.world)
    pinned = pooled.pinned
    holding = [c for c in plan.candidates if pinned is not None and pinned in c.connection_ids]
    assert plan.pinned == (pinned if holding else None)
    for candidate in holding:
        assert pinned is not None
        pool = pooled.pool(pinned)
        same_pool = [c for c in candidate.connection_ids if pooled.pool(c) == pool]
        assert same_pool[0] == pinned
    if pinned is not None and not holding:
        # A pin that is not usable changes nothing: the strategy alone orders.
        unpinned = replace(pooled.world, request=replace(pooled.world.request, pinned=None))
        assert _plan(unpinned).candidates == plan.candidates


def _binding_left(state: ConnectionState | None, model: str, now: float) -> float | None:
    """The least remaining percent among the windows in play (spec: account-wide or the
    model's own, read; one past its reset counts as unspent); None when none is."""
    if state is None:
        return None
    left: list[float] = []
    for w in state.windows:
        if w.used_percent is None or w.model not in (None, model):
            continue
        left.append(_left(w, now))
    return min(left) if left else None


def _left(w: QuotaWindow, now: float) -> float:
    assert w.used_percent is not None
    if w.resets_at is not None and w.resets_at <= now:
        return 100.0
    if w.status is WindowStatus.REJECTED:
        return 0.0
    return min(100.0, max(0.0, 100.0 - w.used_percent))


@POOL_EXAMPLES
@given(pooled_worlds(), st.booleans())
def test_headroom_puts_more_left_first_and_the_unread_last_in_each_plan_pool(
    pooled: PooledWorld, pinned: bool
) -> None:
    world = replace(
        pooled.world,
        settings=pooled.world.settings.model_copy(update={"pool_strategy": "headroom"}),
    )
    if not pinned:
        world = replace(world, request=replace(world.request, pinned=None))
    roster = world.snapshot.roster.connections
    for candidate in _plan(world).candidates:
        pools: dict[tuple[str, str, str | None], list[str]] = {}
        for connection_id in candidate.connection_ids:
            pools.setdefault(pooled.pool(connection_id), []).append(connection_id)
        for members in pools.values():
            if roster[members[0]].billing.billing is not BillingClass.SUBSCRIPTION:
                continue
            ranked = members
            if world.request.pinned in members:
                assert members[0] == world.request.pinned
                ranked = members[1:]
            left = [
                _binding_left(world.snapshot.states.get(c), candidate.model, world.now)
                for c in ranked
            ]
            read = [value for value in left if value is not None]
            assert left[: len(read)] == read, "the unread after every read account"
            assert read == sorted(read, reverse=True), "more left first"
