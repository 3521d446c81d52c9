"""Pools: each strategy's order of a plan's accounts, the session pin, owners and plans kept
apart, and the ladder and named plans applying both.

The three accounts of `_staggered()` are read so that each strategy gives another order,
and none of them is the order a single window (the 5-hour one, or the soonest reset of
any window) would give:

| account | 5h left, resets in | 7d left, resets in | binding window | urgency (min left/s)  |
|---------|--------------------|--------------------|----------------|-----------------------|
| a       | 90 %, 1 h          | 20 %, 5 d          | 7d, 20 %, 5 d  | 20 / 432000 = 4.6e-5  |
| b       | 30 %, 3 h          | 70 %, 2 d          | 5h, 30 %, 3 h  | 70 / 172800 = 4.1e-4  |
| c       | 60 %, 2 h          | 50 %, 6 d          | 7d, 50 %, 6 d  | 50 / 518400 = 9.6e-5  |
"""

from __future__ import annotations

from typing import Any

import pytest

from rungway.app import build_roster
from rungway.config import parse_settings
from rungway.routing.autoid import Ladder
from rungway.routing.billing import BillingClass, Catalog, CatalogEntry, Overage
from rungway.routing.named import gate_named
from rungway.routing.plan import Candidate, RoutePlan, SkipReason
from rungway.routing.pools import PoolOrder, order_pool, pool_rank
from rungway.routing.rungs import Rung
from rungway.routing.settings import LadderSettings, PoolStrategyName
from rungway.routing.snapshot import ConnectionState, Roster, RosterConnection

from .builders import (
    NOW,
    SYNTHETIC_ENTRIES,
    connection,
    order,
    route,
    skip_reasons,
    state,
    window,
)

HOUR = 3_600.0
DAY = 86_400.0
SUB = Rung.SUBSCRIPTION


def _settings(strategy: PoolStrategyName) -> LadderSettings:
    return LadderSettings(rung_budget_usd={"cheap": None, "premium": None}, pool_strategy=strategy)


def _account(
    five_hour: float, five_resets: float, week: float, week_resets: float
) -> ConnectionState:
    return state(
        window(five_hour, name="5h", resets_in=five_resets),
        window(week, name="7d", resets_in=week_resets),
    )


def _staggered() -> dict[str, ConnectionState]:
    return {
        "a": _account(90, 1 * HOUR, 20, 5 * DAY),
        "b": _account(30, 3 * HOUR, 70, 2 * DAY),
        "c": _account(60, 2 * HOUR, 50, 6 * DAY),
    }


def _plans(*ids: str, **owners: str) -> list[RosterConnection]:
    return [connection(conn_id, owner=owners.get(conn_id)) for conn_id in ids]


def _pool(plan: RoutePlan, model: str = "m1", rung: Rung = SUB) -> tuple[str, ...]:
    return next(c.connection_ids for c in plan.candidates if (c.model, c.rung) == (model, rung))


# --- Each strategy --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("fill_first", ("a", "b", "c")),
        # b's binding window (5h, 30 %) resets in 3 h; a's and c's (7d) in 5 and 6 days.
        ("soonest_reset", ("b", "a", "c")),
        # The binding windows' remaining: c 50 %, b 30 %, a 20 %.
        ("headroom", ("c", "b", "a")),
        # Urgency: b 4.1e-4, c 9.6e-5, a 4.6e-5.
        ("expiry_first", ("b", "c", "a")),
    ],
)
def test_each_strategy_orders_a_pool_by_its_own_measure(
    strategy: PoolStrategyName, expected: tuple[str, ...]
) -> None:
    for ladder in ("auto/subscription", "auto/thrifty"):
        plan = route(ladder, _plans("a", "b", "c"), _staggered(), settings=_settings(strategy))
        assert order(plan) == [("m1", SUB, expected)], ladder


def test_soonest_reset_goes_by_the_binding_window_not_the_soonest_of_any() -> None:
    # a's 5h window resets first of all, but a is bound by its weekly window.
    ranks = {cid: pool_rank(s, "soonest_reset", NOW) for cid, s in _staggered().items()}
    assert ranks["b"] < ranks["a"] < ranks["c"]
    assert ranks["a"][1] == NOW + 5 * DAY


def test_expiry_first_breaks_ties_by_headroom() -> None:
    # No window names a reset: nothing expires, so the one with more left goes first.
    states = {"x": state(window(40)), "y": state(window(70)), "z": state(window(40))}
    plan = route("auto/thrifty", _plans("x", "y", "z"), states, settings=_settings("expiry_first"))
    assert _pool(plan) == ("y", "x", "z")


@pytest.mark.parametrize("strategy", ["soonest_reset", "headroom", "expiry_first"])
def test_unread_accounts_go_after_read_ones_and_keep_config_order(
    strategy: PoolStrategyName,
) -> None:
    # `u1` has no state, `u2` only a window without a usage figure: neither is read.
    states = {
        "u2": state(window(None, resets_in=HOUR)),
        "r1": _account(30, 3 * HOUR, 70, 2 * DAY),
        "r2": _account(60, 2 * HOUR, 50, 6 * DAY),
    }
    plan = route(
        "auto/thrifty", _plans("u1", "u2", "r1", "r2"), states, settings=_settings(strategy)
    )
    assert _pool(plan)[2:] == ("u1", "u2")
    assert set(_pool(plan)[:2]) == {"r1", "r2"}


@pytest.mark.parametrize("strategy", ["soonest_reset", "headroom", "expiry_first"])
def test_a_pool_of_unread_accounts_keeps_config_order(strategy: PoolStrategyName) -> None:
    plan = route("auto/thrifty", _plans("p", "q", "r"), {}, settings=_settings(strategy))
    assert _pool(plan) == ("p", "q", "r")


def test_a_window_past_its_reset_counts_as_unspent() -> None:
    # a's 5h reading says 10 % left, but that window reset ten seconds ago: a new one
    # starts unspent, so a is bound by its weekly 60 % and goes before b's 50 %.
    states = {
        "a": state(window(10, name="5h", resets_in=-10), window(60, name="7d", resets_in=DAY)),
        "b": state(window(50, name="5h", resets_in=HOUR), window(90, name="7d", resets_in=DAY)),
    }
    plan = route("auto/thrifty", _plans("b", "a"), states, settings=_settings("headroom"))
    assert _pool(plan) == ("a", "b")


def test_a_model_scoped_window_orders_only_its_model() -> None:
    # a has more left account-wide, but its m2 weekly window is nearly spent.
    roster = [connection(cid, models=("m1", "m2")) for cid in ("a", "b")]
    states = {
        "a": state(window(50), window(10, name="7d_m2", model="m2")),
        "b": state(window(40)),
    }
    plan = route("auto/thrifty", roster, states, settings=_settings("headroom"))
    assert _pool(plan, "m1") == ("a", "b")
    assert _pool(plan, "m2") == ("b", "a")


def test_metered_connections_keep_config_order_under_every_strategy() -> None:
    keys = [connection(cid, "metered-co", "apikey", prices={"m1": 0.2}) for cid in ("k1", "k2")]
    states = {"k1": state(window(10, resets_in=60)), "k2": state(window(90, resets_in=60))}
    for strategy in ("soonest_reset", "headroom", "expiry_first"):
        plan = route("auto/thrifty", keys, states, settings=_settings(strategy))
        assert _pool(plan, rung=Rung.CHEAP) == ("k1", "k2"), strategy


# --- Owners and plans ------------------------------------------------------------------------


def test_a_pool_never_mixes_owners_each_keeps_its_places() -> None:
    # Config order x1, y1, x2, y2: x's pool holds places 1 and 3, y's places 2 and 4.
    states = {
        "x1": state(window(10)),
        "y1": state(window(20)),
        "x2": state(window(90)),
        "y2": state(window(80)),
    }
    roster = _plans("x1", "y1", "x2", "y2", x1="xavier", x2="xavier", y1="yara", y2="yara")
    plan = route("auto/thrifty", roster, states, settings=_settings("headroom"))
    # One pool of four would give x2, y2, y1, x1.
    assert _pool(plan) == ("x2", "y2", "x1", "y1")
    pinned = route("auto/thrifty", roster, states, settings=_settings("headroom"), pinned="y1")
    assert _pool(pinned) == ("x2", "y1", "x1", "y2"), "the pin moves only within yara's pool"


def test_accounts_of_two_plans_of_one_provider_form_two_pools() -> None:
    second = CatalogEntry(
        "planned", "cookie", BillingClass.SUBSCRIPTION, Overage.HARD_STOP, "another plan", "test"
    )
    catalog = Catalog([*SYNTHETIC_ENTRIES, second])
    roster = [
        connection("o1"),
        connection("k1", auth="cookie", catalog=catalog),
        connection("o2"),
        connection("k2", auth="cookie", catalog=catalog),
    ]
    assert roster[0].billing.entry != roster[1].billing.entry
    states = {
        "o1": state(window(10)),
        "k1": state(window(20)),
        "o2": state(window(90)),
        "k2": state(window(80)),
    }
    plan = route("auto/thrifty", roster, states, settings=_settings("headroom"))
    assert _pool(plan) == ("o2", "k2", "o1", "k1")


def test_a_config_owner_defaults_to_the_client_key_and_reaches_the_roster() -> None:
    document: dict[str, Any] = {
        "client_keys": [{"name": "me", "key": {"env": "UNUSED"}}],
        "connections": [
            {
                "id": cid,
                "provider": "anthropic",
                "auth": "oauth",
                "credential": {"env": "UNUSED"},
                "models": ["claude-sonnet-4-5"],
                **extra,
            }
            for cid, extra in (
                ("mine", {"owner": "alex"}),
                ("bound", {"client_key": "me"}),
                ("both", {"owner": "sam", "client_key": "me"}),
                ("shared", {}),
            )
        ],
    }
    roster = build_roster(parse_settings(document))
    owners = {cid: c.owner for cid, c in roster.connections.items()}
    assert owners == {"mine": "alex", "bound": "me", "both": "sam", "shared": None}


# --- The session pin ------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["fill_first", "soonest_reset", "headroom", "expiry_first"])
def test_a_usable_pinned_account_goes_first_in_its_pool_and_nothing_else_moves(
    strategy: PoolStrategyName,
) -> None:
    settings = _settings(strategy)
    unpinned = _pool(
        route("auto/subscription", _plans("a", "b", "c"), _staggered(), settings=settings)
    )
    for pin in ("a", "b", "c"):
        plan = route(
            "auto/subscription", _plans("a", "b", "c"), _staggered(), settings=settings, pinned=pin
        )
        rest = tuple(cid for cid in unpinned if cid != pin)
        assert _pool(plan) == (pin, *rest)
        assert plan.pinned == pin
        assert plan.to_json()["pinned"] == pin


def test_a_spent_pinned_account_is_not_honoured_and_the_strategy_orders_the_rest() -> None:
    states = {**_staggered(), "c": _account(1, HOUR, 50, DAY)}  # 5h at 1 %: below the cut-off
    plan = route(
        "auto/subscription",
        _plans("a", "b", "c"),
        states,
        settings=_settings("headroom"),
        pinned="c",
    )
    assert _pool(plan) == ("b", "a")
    assert skip_reasons(plan, "c") == [SkipReason.QUOTA_EXHAUSTED]
    assert plan.pinned is None
    assert plan.to_json()["pinned"] is None


def test_a_resting_pinned_account_is_not_honoured() -> None:
    states = {**_staggered(), "b": state(window(70), cooldown_for=30)}
    plan = route("auto/thrifty", _plans("a", "b", "c"), states, pinned="b")
    assert "b" not in _pool(plan)
    assert plan.pinned is None


def test_a_pin_never_moves_a_candidate() -> None:
    # The pin sits on the cheap rung: the plan's candidate still goes first, in its order.
    roster = [
        *_plans("p1", "p2"),
        *(connection(cid, "metered-co", "apikey", prices={"m1": 0.2}) for cid in ("k1", "k2")),
    ]
    states = {"p1": state(window(30)), "p2": state(window(80))}
    plan = route("auto/thrifty", roster, states, settings=_settings("headroom"), pinned="k2")
    assert order(plan) == [("m1", SUB, ("p2", "p1")), ("m1", Rung.CHEAP, ("k2", "k1"))]
    assert plan.pinned == "k2"


# --- The plain function, the cache ------------------------------------------------------------


def test_order_pool_is_a_plain_function_over_ids_and_states() -> None:
    ids = ("a", "b", "c")
    assert order_pool(ids, _staggered(), "expiry_first", NOW) == ("b", "c", "a")
    assert order_pool(ids, _staggered(), "expiry_first", NOW, pinned="a") == ("a", "b", "c")
    assert order_pool(ids, _staggered(), "fill_first", NOW, pinned="zz") is ids
    assert order_pool(("a",), _staggered(), "headroom", NOW, pinned="a") == ("a",)


def test_expiry_first_moves_with_the_clock() -> None:
    # e: 10 % left of a window resetting in 2 h (1.4e-3 % a second to spend it all); f: 60 %
    # of one resetting in 20 h (8.3e-4). e goes first; a minute after e's reset its window
    # counts as unspent with no reset ahead (no urgency), and f goes first.
    states = {
        "e": state(window(10, resets_in=2 * HOUR)),
        "f": state(window(60, resets_in=20 * HOUR)),
    }
    roster = Roster(_plans("e", "f"))
    assert order_pool(("e", "f"), states, "expiry_first", NOW, roster=roster) == ("e", "f")
    later = NOW + 2 * HOUR + 60
    assert order_pool(("e", "f"), states, "expiry_first", later, roster=roster) == ("f", "e")
    # And back: what the roster keeps between decisions never answers for another instant.
    assert order_pool(("e", "f"), states, "expiry_first", NOW, roster=roster) == ("e", "f")


def test_a_changed_state_is_ranked_afresh() -> None:
    roster = Roster(_plans("a", "b"))
    before = {"a": state(window(80)), "b": state(window(20))}
    after = {"a": state(window(10)), "b": before["b"]}
    assert order_pool(("a", "b"), before, "headroom", NOW, roster=roster) == ("a", "b")
    assert order_pool(("a", "b"), after, "headroom", NOW, roster=roster) == ("b", "a")


def test_nothing_to_order_costs_no_pool_work() -> None:
    single = Roster(_plans("only"))
    assert not PoolOrder("expiry_first", {}, NOW, single).needed(None)
    assert PoolOrder("expiry_first", {}, NOW, single).needed("only")
    assert not PoolOrder("fill_first", {}, NOW, Roster(_plans("a", "b"))).needed(None)
    assert PoolOrder("headroom", {}, NOW, Roster(_plans("a", "b"))).needed(None)


# --- Named models ---------------------------------------------------------------------------


def _named(*ids: str) -> RoutePlan:
    candidates = tuple(Candidate("planned", "m1", SUB, (cid,)) for cid in ids)
    return RoutePlan("m1", None, None, candidates, ())


def _named_ids(plan: RoutePlan) -> tuple[str, ...]:
    return tuple(c.connection_ids[0] for c in plan.candidates)


def test_a_named_models_pool_is_ordered_as_the_ladder_orders_it() -> None:
    named = _named("a", "b", "c")
    roster = Roster(_plans("a", "b", "c"))
    assert gate_named(named, _staggered(), NOW) is named, "fill-first without a pin: as is"
    ordered = gate_named(named, _staggered(), NOW, strategy="headroom", roster=roster)
    assert _named_ids(ordered) == ("c", "b", "a")
    assert ordered.pinned is None
    pinned = gate_named(named, _staggered(), NOW, strategy="headroom", pinned="a", roster=roster)
    assert _named_ids(pinned) == ("a", "c", "b")
    assert pinned.pinned == "a"


def test_a_named_models_resting_pin_is_left_out_and_not_honoured() -> None:
    named = _named("a", "b", "c")
    states = {**_staggered(), "a": state(window(90), cooldown_for=60)}
    gated = gate_named(named, states, NOW, strategy="fill_first", pinned="a")
    assert _named_ids(gated) == ("b", "c")
    assert gated.pinned is None
    assert gated.earliest_reset == NOW + 60


def test_the_plan_ladder_reports_the_honoured_pin_only() -> None:
    plan = route("auto/thrifty", _plans("a", "b"), {}, pinned="a")
    assert plan.ladder is Ladder.THRIFTY
    assert plan.pinned == "a"
    assert route("auto/thrifty", _plans("a", "b"), {}, pinned="gone").pinned is None
