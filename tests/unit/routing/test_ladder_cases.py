"""The ladder's behaviour, case by case.

Cases 1-25 are the reference implementation's test suite for the subscription ladder,
adapted to rungway's API and to the places where the spec deliberately differs: no
`enabled` flag, keyless from `auth: none`, hysteresis from each window's `was_exhausted`,
candidates split per rung, and a scorer that ranks inside a rung. The cases after them are
the ones that suite lacks. NOW is fixed and the billing catalog is synthetic (`builders`).

Case 24 (clamping a cooldown to the upstream's reset instant) is not ported: it belongs to
the quota and cooldown state, which hands the ladder a finished `cooldown_until`; the pure
routing core has no clamp to test.
"""

from __future__ import annotations

import pydantic
import pytest
import yaml

from rungway.pricing import Tier
from rungway.routing.autoid import Category
from rungway.routing.billing import BillingClass, Overage
from rungway.routing.rungs import Rung, rung_for
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import BreakerState, ConnectionState, RungSpend, WindowStatus

from .builders import (
    CATALOG,
    FRESH,
    NOW,
    OTHER_API,
    connection,
    order,
    route,
    skip_reasons,
    state,
    window,
)

SUB = Rung.SUBSCRIPTION


# --- Classification (cases 1-5) -------------------------------------------------------------


def test_case01_no_credential_is_keyless_and_costs_nothing_extra_whatever_the_provider() -> None:
    verdict = CATALOG.classify("metered-co", "none")
    assert verdict.billing is BillingClass.KEYLESS
    assert verdict.costs_nothing_extra


def test_case02_auth_specific_entry_decides_between_plan_login_and_api_key() -> None:
    assert CATALOG.classify("planned", "oauth").billing is BillingClass.SUBSCRIPTION
    assert CATALOG.classify("planned", "apikey").billing is BillingClass.METERED


def test_case03_provider_wide_entry_applies_to_an_auth_without_its_own_entry() -> None:
    verdict = CATALOG.classify("overflowing", "cookie")
    assert verdict.billing is BillingClass.SUBSCRIPTION
    assert verdict.costs_nothing_extra
    assert verdict.overage is not Overage.HARD_STOP


def test_case04_uncurated_provider_is_unknown_neither_free_nor_overage_safe() -> None:
    verdict = CATALOG.classify("brand-new", "oauth")
    assert verdict.billing is BillingClass.UNKNOWN
    assert not verdict.costs_nothing_extra
    assert verdict.overage is Overage.UNKNOWN
    # Uncurated is not free: it lands on the rung of its price, like metered.
    assert rung_for(verdict, Tier.CHEAP) is Rung.CHEAP


def test_case05_rung_follows_billing_first_and_the_model_tier_only_for_metered() -> None:
    assert rung_for(CATALOG.classify("planned", "oauth"), Tier.PREMIUM) is Rung.SUBSCRIPTION
    assert rung_for(CATALOG.classify("metered-co", "apikey"), Tier.PREMIUM) is Rung.PREMIUM
    for provider in ("planned", "metered-co", "brand-new"):
        assert rung_for(CATALOG.classify(provider, "none"), Tier.PREMIUM) is Rung.KEYLESS


# --- auto/subscription, fail closed (cases 6-14) --------------------------------------------


def test_case06_there_is_no_switch_settings_reject_an_enabled_key() -> None:
    with pytest.raises(pydantic.ValidationError, match="enabled"):
        LadderSettings.model_validate({"enabled": False})


def test_case07_fresh_plan_connection_with_headroom_is_kept() -> None:
    plan = route("auto/subscription", [connection("c1")], {"c1": FRESH})
    assert order(plan) == [("m1", SUB, ("c1",))]
    assert plan.skipped == ()


def test_case08_subscription_that_meters_to_paid_past_its_quota_is_excluded() -> None:
    plan = route("auto/subscription", [connection("c1", "overflowing")], {"c1": FRESH})
    assert plan.candidates == ()
    assert skip_reasons(plan, "c1") == ["overage_not_hard_stop"]


@pytest.mark.parametrize(("permitted", "kept"), [(None, True), (False, True), (True, False)])
def test_case08b_a_hard_stop_plan_whose_account_says_it_bills_past_its_quota_is_excluded(
    permitted: bool | None, kept: bool
) -> None:
    # Claude's extra usage or Codex credits: the catalog says hard-stop, the account's own
    # flag says otherwise, and the live evidence wins; an unread flag leaves the catalog's.
    live = ConnectionState(FRESH.windows, overage_permitted=permitted)
    plan = route("auto/subscription", [connection("c1")], {"c1": live})
    assert order(plan) == ([("m1", SUB, ("c1",))] if kept else [])
    assert skip_reasons(plan, "c1") == ([] if kept else ["overage_not_hard_stop"])
    thrifty = route("auto/thrifty", [connection("c1")], {"c1": live})
    assert order(thrifty) == [("m1", SUB, ("c1",))]


def test_case09_metered_key_on_a_provider_that_also_sells_a_plan_is_excluded() -> None:
    plan = route("auto/subscription", [connection("c1", auth="apikey")], {"c1": FRESH})
    assert plan.candidates == ()
    assert skip_reasons(plan, "c1") == ["not_subscription"]


def test_case10_keyless_connection_is_not_a_subscription() -> None:
    plan = route("auto/subscription", [connection("k1", "freebie", "none")], {"k1": FRESH})
    assert plan.candidates == ()
    assert skip_reasons(plan, "k1") == ["not_subscription"]


@pytest.mark.parametrize(
    ("states", "reason"),
    [
        ({}, "quota_missing"),
        ({"c1": state(window(status=WindowStatus.UNKNOWN))}, "quota_unknown"),
        ({"c1": state(window(None))}, "quota_unknown"),
    ],
    ids=["no-reading", "status-unknown", "no-usage-figure"],
)
def test_case11_missing_or_unknown_reading_excludes(
    states: dict[str, ConnectionState], reason: str
) -> None:
    plan = route("auto/subscription", [connection("c1")], states)
    assert plan.candidates == ()
    assert skip_reasons(plan, "c1") == [reason]


def test_case12_reading_older_than_max_state_age_excludes() -> None:
    plan = route("auto/subscription", [connection("c1")], {"c1": state(window(age=600))})
    assert plan.candidates == ()
    assert skip_reasons(plan, "c1") == ["quota_stale"]


def test_case13_exhausted_connection_leaves_the_allowlist_the_others_stay_in_order() -> None:
    roster = [connection(name) for name in ("a", "b", "c")]
    states = {"a": FRESH, "b": state(window(0)), "c": FRESH}
    plan = route("auto/subscription", roster, states)
    assert order(plan) == [("m1", SUB, ("a", "c"))]
    assert skip_reasons(plan, "b") == ["quota_exhausted"]


def test_case14_candidate_with_no_usable_connection_is_dropped_not_left_empty() -> None:
    roster = [connection("a"), connection("b")]
    plan = route("auto/subscription", roster, {"a": state(window(0)), "b": state(window(0))})
    assert plan.candidates == ()


# --- auto/thrifty, fail open and ordered (cases 15-20) --------------------------------------


def test_case15_thrifty_orders_subscription_keyless_cheap_premium() -> None:
    roster = [
        connection("p1", "metered-co", "apikey", {"premium-model": Tier.PREMIUM}),
        connection("c1", "metered-co", "apikey", {"cheap-model": Tier.CHEAP}),
        connection("s1", "planned", "oauth", {"plan-model": Tier.PREMIUM}),
        connection("k1", "anything", "none", {"keyless-model": Tier.PREMIUM}),
    ]
    plan = route("auto/thrifty", roster)
    assert [(model, rung) for model, rung, _ in order(plan)] == [
        ("plan-model", Rung.SUBSCRIPTION),
        ("keyless-model", Rung.KEYLESS),
        ("cheap-model", Rung.CHEAP),
        ("premium-model", Rung.PREMIUM),
    ]


def test_case16_exhausted_plan_drops_and_unread_metered_connection_remains() -> None:
    roster = [
        connection("s1", "planned", "oauth", ["plan-model"]),
        connection("c1", "metered-co", "apikey", ["cheap-model"]),
    ]
    plan = route("auto/thrifty", roster, {"s1": state(window(0))})
    assert order(plan) == [("cheap-model", Rung.CHEAP, ("c1",))]
    assert skip_reasons(plan, "s1") == ["quota_exhausted"]


def test_case17_thrifty_admits_a_plan_connection_with_no_reading() -> None:
    plan = route("auto/thrifty", [connection("s1", models=["plan-model"])])
    assert order(plan) == [("plan-model", SUB, ("s1",))]


def test_case18_equal_candidates_in_one_rung_keep_roster_order() -> None:
    models = ["first", "second", "third"]
    prices = dict.fromkeys(models, 0.5)
    plan = route("auto/thrifty", [connection("c1", "metered-co", "apikey", models, prices=prices)])
    assert [model for model, _, _ in order(plan)] == models


CHEAP_PRICE = {"cheap-model": 0.5}
"""A price per million input tokens: a budget can bind only a model it can price."""


def test_case19_budget_zero_removes_the_rung_from_thrifty() -> None:
    roster = [
        connection("c1", "metered-co", "apikey", {"cheap-model": Tier.CHEAP}, prices=CHEAP_PRICE),
        connection("c2", "metered-co", "apikey", {"premium-model": Tier.PREMIUM}),
    ]
    settings = LadderSettings(rung_budget_usd={"premium": 0})
    plan = route("auto/thrifty", roster, settings=settings)
    assert order(plan) == [("cheap-model", Rung.CHEAP, ("c1",))]
    assert [(s.reason, s.rung) for s in plan.skipped] == [("budget_disabled", Rung.PREMIUM)]


@pytest.mark.parametrize(
    ("spend", "kept"),
    [
        (RungSpend(5.0), False),
        (RungSpend(1.0), True),
        (None, True),
        (RungSpend(3.0, reserved_usd=2.0), False),
    ],
    ids=["spent-equals-budget", "under-budget", "no-accounting", "reservations-count"],
)
def test_case20_positive_budget_gates_on_spend_and_reservations(
    spend: RungSpend | None, kept: bool
) -> None:
    roster = [
        connection("c1", "metered-co", "apikey", {"cheap-model": Tier.CHEAP}, prices=CHEAP_PRICE)
    ]
    plan = route(
        "auto/thrifty",
        roster,
        settings=LadderSettings(rung_budget_usd={"cheap": 5.0, "premium": None}),
        spend={} if spend is None else {Rung.CHEAP: spend},
    )
    assert bool(plan.candidates) is kept
    if not kept:
        assert [s.reason for s in plan.skipped] == ["budget_exhausted"]


def test_an_unpriced_model_on_a_budgeted_paid_rung_is_skipped_with_the_fix() -> None:
    roster = [
        connection("c1", "metered-co", "apikey", {"house-model": Tier.PREMIUM}),
        connection("c2", "metered-co", "apikey", {"cheap-model": Tier.CHEAP}, prices=CHEAP_PRICE),
    ]
    budgeted = LadderSettings(rung_budget_usd={"cheap": 5.0, "premium": 20.0})
    plan = route("auto/thrifty", roster, settings=budgeted)
    assert order(plan) == [("cheap-model", Rung.CHEAP, ("c2",))]
    assert [(s.reason, s.model, s.rung, s.detail) for s in plan.skipped] == [
        (
            "unpriced",
            "metered-co/house-model",
            Rung.PREMIUM,
            "no list price for metered-co/house-model: add it under `prices:` in the config",
        )
    ]
    # Without a limit on its rung there is nothing for a price to bind: it is planned.
    unlimited = LadderSettings(rung_budget_usd={"cheap": 5.0, "premium": None})
    assert [m for m, _, _ in order(route("auto/thrifty", roster, settings=unlimited))] == [
        "cheap-model",
        "house-model",
    ]


# --- Reset, hysteresis, rung order (cases 21-25) --------------------------------------------
# The reference's unparseable reset ("not-a-date") has no counterpart: `resets_at` is a
# float or None by type, and "no state at all" is case 11's `quota_missing`, never stale.


@pytest.mark.parametrize(
    ("resets_in", "kept"),
    [(-0.001, True), (0.0, True), (60.0, False), (None, False)],
    ids=["reset-1ms-ago", "reset-now", "reset-in-60s", "no-reset"],
)
def test_case21_window_whose_reset_passed_is_tried_at_once(
    resets_in: float | None, kept: bool
) -> None:
    # Read one second ago and spent: at its reset the new window starts unspent, and a
    # hard-stop plan is tried (never refused as `quota_stale` at the reset it announced).
    states = {"c1": state(window(0, resets_in=resets_in, age=1.0))}
    plan = route("auto/subscription", [connection("c1")], states)
    assert bool(plan.candidates) is kept
    if not kept:
        assert skip_reasons(plan, "c1") == ["quota_exhausted"]


def test_case21_thrifty_ignores_an_exhausted_reading_of_a_window_that_has_since_reset() -> None:
    states = {"c1": state(window(0, resets_in=-1.0))}
    plan = route("auto/thrifty", [connection("c1")], states)
    assert order(plan) == [("m1", SUB, ("c1",))]


@pytest.mark.parametrize(
    ("remaining", "was_exhausted", "kept"),
    [(3.0, False, True), (3.0, True, False), (6.0, True, True), (2.0, False, False)],
    ids=["in-play-stays", "just-reset-waits", "above-reentry-returns", "at-exit-leaves"],
)
def test_case22_hysteresis_band_between_exit_and_reentry(
    remaining: float, was_exhausted: bool, kept: bool
) -> None:
    settings = LadderSettings(exit_cutoff_percent=2, reentry_min_remaining_percent=5)
    states = {"c1": state(window(remaining, was_exhausted=was_exhausted))}
    for ladder in ("auto/subscription", "auto/thrifty"):
        plan = route(ladder, [connection("c1")], states, settings=settings)
        assert bool(plan.candidates) is kept, ladder


def test_case23_reentry_below_exit_is_rejected_by_the_settings() -> None:
    # The reference clamps the floor up to the exit cut-off; rungway refuses the setting.
    with pytest.raises(pydantic.ValidationError, match="reentry_min_remaining_percent"):
        LadderSettings(exit_cutoff_percent=10, reentry_min_remaining_percent=1)
    settings = LadderSettings(exit_cutoff_percent=10, reentry_min_remaining_percent=10)
    states = {"c1": state(window(5, was_exhausted=True))}
    plan = route("auto/subscription", [connection("c1")], states, settings=settings)
    assert skip_reasons(plan, "c1") == ["quota_exhausted"]


def test_case25_rungs_escalate_subscription_keyless_free_cheap_premium() -> None:
    assert [rung.label for rung in Rung] == ["subscription", "keyless", "free", "cheap", "premium"]
    assert [int(rung) for rung in Rung] == [0, 1, 2, 3, 4]
    assert [rung.paid for rung in Rung] == [False, False, False, True, True]


# --- Cases the reference suite lacks ---------------------------------------------------------


def test_mixed_plan_and_key_candidate_splits_and_each_part_keeps_only_its_rung() -> None:
    roster = [
        connection("s1", "planned", "oauth", {"m1": Tier.PREMIUM}),
        connection("k1", "planned", "apikey", {"m1": Tier.PREMIUM}),
        connection("s2", "planned", "oauth", {"m1": Tier.PREMIUM}),
    ]
    thrifty = route("auto/thrifty", roster)
    assert order(thrifty) == [("m1", SUB, ("s1", "s2")), ("m1", Rung.PREMIUM, ("k1",))]
    strict = route("auto/subscription", roster, {"s1": FRESH, "k1": FRESH, "s2": FRESH})
    assert order(strict) == [("m1", SUB, ("s1", "s2"))]
    assert skip_reasons(strict, "k1") == ["not_subscription"]


def test_a_passed_5h_reset_lets_the_connection_be_tried_while_its_7d_window_is_fresh() -> None:
    roster = [connection("s1"), connection("s2")]
    states = {
        "s1": state(
            window(1, name="5h", resets_in=-30, age=5), window(60, name="7d", resets_in=86_400)
        ),
        "s2": state(
            window(40, name="5h", resets_in=3_600, age=5), window(60, name="7d", resets_in=86_400)
        ),
    }
    strict = route("auto/subscription", roster, states)
    # The 1 % it showed is from the old 5h window: the new one starts unspent.
    assert {c for cand in strict.candidates for c in cand.connection_ids} == {"s1", "s2"}
    assert strict.skipped == ()
    # Thrifty reads the passed reset as "no evidence": the 1 % it showed is from the old window.
    assert order(route("auto/thrifty", roster, states)) == [("m1", SUB, ("s1", "s2"))]


@pytest.mark.parametrize("ladder", ["auto/subscription", "auto/thrifty"])
def test_model_scoped_window_gates_only_its_own_model(ladder: str) -> None:
    roster = [connection("s1", models=["fable", "saga"])]
    states = {"s1": state(window(80, name="5h"), window(0, name="7d_oi", model="fable"))}
    plan = route(ladder, roster, states)
    assert order(plan) == [("saga", SUB, ("s1",))]
    assert [(s.reason, s.connection_id, s.model) for s in plan.skipped] == [
        ("quota_exhausted", "s1", "fable")
    ]


def test_with_only_a_model_scoped_reading_other_models_are_unverified_for_subscription() -> None:
    roster = [connection("s1", models=["fable", "saga"])]
    states = {"s1": state(window(70, name="7d_oi", model="fable"))}
    strict = route("auto/subscription", roster, states)
    assert order(strict) == [("fable", SUB, ("s1",))]
    assert [(s.reason, s.model) for s in strict.skipped] == [("quota_missing", "saga")]
    assert [model for model, _, _ in order(route("auto/thrifty", roster, states))] == [
        "fable",
        "saga",
    ]


def test_empty_subscription_pool_reports_exhaustion_and_the_earliest_reset() -> None:
    roster = [
        connection("s1"),
        connection("s2"),
        connection("s3"),
        connection("s4"),
        connection("paid", "metered-co", "apikey"),
    ]
    states = {
        "s1": state(window(0, resets_in=3_600)),
        "s2": state(window(1, name="7d", resets_in=900, status=WindowStatus.REJECTED)),
        "s3": state(FRESH.windows[0], cooldown_for=1_200),
        "s4": state(window(age=900)),  # stale, not exhausted: no reset to wait for
        "paid": state(cooldown_for=10),  # a paid connection never sets the plan's retry time
    }
    plan = route("auto/subscription", roster, states)
    assert plan.candidates == ()
    assert plan.subscription_exhausted
    assert plan.earliest_reset == NOW + 900
    assert {s.connection_id: s.reason for s in plan.skipped} == {
        "s1": "quota_exhausted",
        "s2": "quota_exhausted",
        "s3": "cooldown",
        "s4": "quota_stale",
        "paid": "not_subscription",
    }


def test_empty_subscription_pool_without_exhausted_plans_is_unavailable_not_exhausted() -> None:
    roster = [connection("s1"), connection("paid", "metered-co", "apikey")]
    plan = route("auto/subscription", roster, {"s1": state(window(age=900)), "paid": FRESH})
    assert plan.candidates == ()
    assert not plan.subscription_exhausted
    assert plan.earliest_reset is None


def test_earliest_reset_waits_for_both_the_cooldown_and_the_exhausted_window() -> None:
    states = {"s1": state(window(0, resets_in=3_600), cooldown_for=60)}
    plan = route("auto/subscription", [connection("s1")], states)
    assert plan.earliest_reset == NOW + 3_600


# Usage inside a window only grows until its reset, so a reading at or below the cut-off with
# a reset still ahead stays evidence after it ages; and an exhausted connection gets no
# traffic, hence no fresh passive reading, until something polls it.
EXHAUSTED_AND_AGED = state(window(1, resets_in=3_600, age=600, was_exhausted=True))


def test_thrifty_keeps_a_window_last_seen_exhausted_out_until_its_reset_as_the_reading_ages() -> (
    None
):
    plan = route("auto/thrifty", [connection("s1")], {"s1": EXHAUSTED_AND_AGED})
    assert plan.candidates == ()


def test_subscription_pool_exhausted_by_an_aged_reading_still_reports_its_reset() -> None:
    plan = route("auto/subscription", [connection("s1")], {"s1": EXHAUSTED_AND_AGED})
    assert plan.subscription_exhausted
    assert plan.earliest_reset == NOW + 3_600


def test_an_aged_rejection_keeps_the_window_out_until_its_reset() -> None:
    rejected = state(window(50, resets_in=3_600, age=600, status=WindowStatus.REJECTED))
    for ladder in ("auto/subscription", "auto/thrifty"):
        plan = route(ladder, [connection("s1")], {"s1": rejected})
        assert skip_reasons(plan, "s1") == ["quota_exhausted"], ladder
        assert plan.earliest_reset == NOW + 3_600, ladder


def test_no_higher_rung_precedes_a_usable_lower_rung_whatever_the_scores() -> None:
    roster = [
        connection("prem", "metered-co", "apikey", {"big": Tier.PREMIUM}, prices={"big": 3.0}),
        connection("cheap", "metered-co", "apikey", {"small": Tier.CHEAP}, prices={"small": 0.1}),
        connection("key", "anything", "none", ["local"]),
        # A plan connection near its cut-off and half-open scores worst of all, yet leads.
        connection("plan", models=["m1"]),
    ]
    states = {"plan": state(window(3), breaker=BreakerState.HALF_OPEN)}
    plan = route("auto/thrifty", roster, states)
    assert [rung for _, rung, _ in order(plan)] == [
        Rung.SUBSCRIPTION,
        Rung.KEYLESS,
        Rung.CHEAP,
        Rung.PREMIUM,
    ]
    assert plan.candidates[0].score < plan.candidates[-1].score


def test_inside_a_rung_the_scorer_puts_the_cheaper_model_first() -> None:
    prices = {"dear": 0.9, "cheaper": 0.2}
    roster = [connection("c1", "metered-co", "apikey", ["dear", "cheaper"], prices=prices)]
    assert [model for model, _, _ in order(route("auto/thrifty", roster))] == ["cheaper", "dear"]


def test_budget_zero_from_the_ladder_config_section_removes_paid_rungs_from_thrifty() -> None:
    section = yaml.safe_load(
        """
        exit_cutoff_percent: 2
        reentry_min_remaining_percent: 5
        max_state_age_s: 180
        rung_budget_usd: {cheap: 0, premium: 0}
        budget_period: month
        """
    )
    settings = LadderSettings.model_validate(section)
    roster = [
        connection("s1", models=["plan-model"]),
        connection("c1", "metered-co", "apikey", {"cheap-model": Tier.CHEAP}),
        connection("p1", "metered-co", "apikey", {"premium-model": Tier.PREMIUM}),
    ]
    plan = route("auto/thrifty", roster, settings=settings)
    assert order(plan) == [("plan-model", SUB, ("s1",))]
    assert sorted((s.reason, s.rung) for s in plan.skipped) == [
        ("budget_disabled", Rung.CHEAP),
        ("budget_disabled", Rung.PREMIUM),
    ]


COLD_ROSTER = [
    connection("s1", models=["plan-model", "other"]),
    connection("s2", models=["plan-model"]),
    connection("k1", "anything", "none", ["local"]),
    connection("c1", "metered-co", "apikey", {"cheap-model": Tier.CHEAP}),
    connection("p1", "brand-new", "oauth", {"premium-model": Tier.PREMIUM}),
]


def test_cold_start_subscription_is_empty_and_says_no_reading_yet() -> None:
    plan = route("auto/subscription", COLD_ROSTER)
    assert plan.candidates == ()
    assert {s.connection_id: s.reason for s in plan.skipped} == {
        "s1": "quota_missing",
        "s2": "quota_missing",
        "k1": "not_subscription",
        "c1": "not_subscription",
        "p1": "not_subscription",
    }
    assert not plan.subscription_exhausted
    assert plan.earliest_reset is None


def test_cold_start_thrifty_drops_nothing() -> None:
    plan = route("auto/thrifty", COLD_ROSTER)
    assert plan.skipped == ()
    assert order(plan) == [
        ("plan-model", SUB, ("s1", "s2")),
        ("other", SUB, ("s1",)),
        ("local", Rung.KEYLESS, ("k1",)),
        ("cheap-model", Rung.CHEAP, ("c1",)),
        ("premium-model", Rung.PREMIUM, ("p1",)),
    ]


def test_connection_speaking_another_api_is_planned_like_any_other() -> None:
    # The engine translates between APIs, so the request's API narrows nothing.
    roster = [connection("s1"), connection("s2", api=OTHER_API)]
    plan = route("auto/thrifty", roster)
    assert order(plan) == [("m1", SUB, ("s1", "s2"))]
    assert plan.skipped == ()


def test_category_id_keeps_only_models_listed_for_the_category() -> None:
    categories = {"coder": frozenset({Category.CODING}), "talker": frozenset({Category.CHAT})}
    roster = [connection("s1", models=["coder", "talker"], categories=categories)]
    plan = route("auto/coding:subscription", roster, {"s1": FRESH})
    assert order(plan) == [("coder", SUB, ("s1",))]
    assert [(s.reason, s.model) for s in plan.skipped] == [("category_mismatch", "planned/talker")]


@pytest.mark.parametrize(
    ("health", "reason"),
    [
        (state(FRESH.windows[0], cooldown_for=30), "cooldown"),
        (state(FRESH.windows[0], breaker=BreakerState.OPEN), "breaker_open"),
    ],
    ids=["cooldown", "breaker-open"],
)
def test_cooldown_and_open_breaker_drop_a_connection_on_both_ladders(
    health: ConnectionState, reason: str
) -> None:
    for ladder in ("auto/subscription", "auto/thrifty"):
        plan = route(ladder, [connection("s1")], {"s1": health})
        assert plan.candidates == (), ladder
        assert skip_reasons(plan, "s1") == [reason], ladder


def test_half_open_breaker_is_a_thrifty_probe_but_not_a_verified_subscription() -> None:
    states = {"s1": state(FRESH.windows[0], breaker=BreakerState.HALF_OPEN)}
    assert skip_reasons(route("auto/subscription", [connection("s1")], states), "s1") == [
        "breaker_half_open"
    ]
    assert order(route("auto/thrifty", [connection("s1")], states)) == [("m1", SUB, ("s1",))]
