"""Every branch of every gate, and the settings they read.

`strict=True` is the `auto/subscription` reading of the evidence (anything unverified
fails); `strict=False` is `auto/thrifty` (only positive evidence of exhaustion fails).
"""

from __future__ import annotations

from dataclasses import replace

import pydantic
import pytest

from rungway.routing.billing import (
    LIVE,
    BillingClass,
    BillingVerdict,
    Catalog,
    CatalogEntry,
    Overage,
)
from rungway.routing.gates import (
    PASS,
    budget_verdict,
    disabled_verdict,
    health_verdict,
    quota_verdict,
    subscription_verdict,
    window_verdict,
)
from rungway.routing.plan import SkipReason
from rungway.routing.rungs import Rung
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import BreakerState, QuotaWindow, RungSpend, WindowStatus

from .builders import DEFAULTS, FRESH, NOW, connection, route, skip_reasons, state, window

BAND = LadderSettings(exit_cutoff_percent=2, reentry_min_remaining_percent=5)


def reason(
    w: QuotaWindow, *, strict: bool, settings: LadderSettings = DEFAULTS
) -> SkipReason | None:
    return window_verdict(w, settings, NOW, strict=strict).reason


# --- window_verdict: reset-aware staleness ---------------------------------------------------


@pytest.mark.parametrize("resets_in", [-3_600.0, -0.001, 0.0])
def test_window_whose_reset_has_come_passes_both_ladders_as_a_new_unspent_window(
    resets_in: float,
) -> None:
    # Read a second ago and showing exhaustion: the reading is of the window that is over,
    # and the new one starts unspent, so the plan is tried rather than refused as stale.
    w = window(0, resets_in=resets_in, status=WindowStatus.REJECTED)
    assert window_verdict(w, DEFAULTS, NOW, strict=True) == PASS
    assert window_verdict(w, DEFAULTS, NOW, strict=False) == PASS


def test_window_whose_reset_is_ahead_is_judged_on_its_reading() -> None:
    verdict = window_verdict(window(40, resets_in=0.001), DEFAULTS, NOW, strict=True)
    assert verdict.passed
    assert verdict.headroom == 40


# --- window_verdict: rejected, stale, unknown -----------------------------------------------


@pytest.mark.parametrize("strict", [True, False])
def test_fresh_rejection_is_exhaustion_whatever_the_percent(strict: bool) -> None:
    w = window(90, resets_in=600, status=WindowStatus.REJECTED)
    verdict = window_verdict(w, DEFAULTS, NOW, strict=strict)
    assert verdict.reason is SkipReason.QUOTA_EXHAUSTED
    assert verdict.resets_at == NOW + 600
    assert verdict.detail == "5h: rejected by the upstream"


@pytest.mark.parametrize("strict", [True, False])
def test_aged_rejection_with_a_reset_ahead_still_holds(strict: bool) -> None:
    w = window(90, resets_in=600, age=3_600, status=WindowStatus.REJECTED)
    assert reason(w, strict=strict) is SkipReason.QUOTA_EXHAUSTED


def test_aged_rejection_without_a_reset_is_only_stale() -> None:
    w = window(90, age=3_600, status=WindowStatus.REJECTED)
    assert reason(w, strict=True) is SkipReason.QUOTA_STALE
    assert reason(w, strict=False) is None


def test_reading_older_than_max_state_age_is_stale_for_subscription_only() -> None:
    w = window(50, age=181)
    verdict = window_verdict(w, DEFAULTS, NOW, strict=True)
    assert verdict.reason is SkipReason.QUOTA_STALE
    assert verdict.detail == "5h: read 181s ago"
    assert window_verdict(w, DEFAULTS, NOW, strict=False) == PASS


def test_reading_exactly_max_state_age_old_is_still_fresh() -> None:
    assert reason(window(50, age=180), strict=True) is None


def test_max_state_age_follows_the_settings() -> None:
    assert reason(
        window(50, age=100), strict=True, settings=LadderSettings(max_state_age_s=60)
    ) is (SkipReason.QUOTA_STALE)


@pytest.mark.parametrize(
    "w",
    [window(50, status=WindowStatus.UNKNOWN), window(None)],
    ids=["status-unknown", "no-usage-figure"],
)
def test_unknown_reading_fails_subscription_and_admits_thrifty(w: QuotaWindow) -> None:
    assert reason(w, strict=True) is SkipReason.QUOTA_UNKNOWN
    assert window_verdict(w, DEFAULTS, NOW, strict=False) == PASS


def test_warning_status_is_judged_by_its_percent_like_allowed() -> None:
    assert reason(window(30, status=WindowStatus.WARNING), strict=True) is None
    assert reason(window(1, status=WindowStatus.WARNING), strict=True) is (
        SkipReason.QUOTA_EXHAUSTED
    )


# --- window_verdict: cut-off and hysteresis --------------------------------------------------


@pytest.mark.parametrize("strict", [True, False])
def test_remaining_exactly_at_the_cut_off_is_exhausted(strict: bool) -> None:
    verdict = window_verdict(window(2, resets_in=60), DEFAULTS, NOW, strict=strict)
    assert verdict.reason is SkipReason.QUOTA_EXHAUSTED
    assert verdict.resets_at == NOW + 60
    assert verdict.detail == "5h: 2% left, at or below the 2% cut-off"


def test_remaining_just_above_the_cut_off_passes_with_its_headroom() -> None:
    verdict = window_verdict(window(2.5), DEFAULTS, NOW, strict=True)
    assert verdict.passed
    assert verdict.headroom == 2.5


def test_over_used_window_is_exhausted() -> None:
    assert reason(window(-5), strict=False) is SkipReason.QUOTA_EXHAUSTED


@pytest.mark.parametrize(
    ("remaining", "was_exhausted", "expected"),
    [
        # In play: stays until at or below the exit cut-off.
        (3.0, False, None),
        (2.0, False, SkipReason.QUOTA_EXHAUSTED),
        # Last seen exhausted: comes back only above the re-entry level.
        (2.0, True, SkipReason.QUOTA_EXHAUSTED),
        (4.0, True, SkipReason.QUOTA_REENTRY),
        (5.0, True, SkipReason.QUOTA_REENTRY),
        (5.5, True, None),
    ],
)
@pytest.mark.parametrize("strict", [True, False])
def test_hysteresis_band_exit_and_reentry(
    remaining: float, was_exhausted: bool, expected: SkipReason | None, strict: bool
) -> None:
    w = window(remaining, resets_in=900, was_exhausted=was_exhausted)
    verdict = window_verdict(w, BAND, NOW, strict=strict)
    assert verdict.reason is expected
    if expected is not None:
        assert verdict.resets_at == NOW + 900


def test_reentry_refusal_says_why() -> None:
    verdict = window_verdict(window(4, was_exhausted=True), BAND, NOW, strict=True)
    assert verdict.detail == (
        "5h: 4% left, not yet above the 5% re-entry level since it was exhausted"
    )


def test_equal_exit_and_reentry_leave_no_band() -> None:
    flat = LadderSettings(exit_cutoff_percent=5, reentry_min_remaining_percent=5)
    assert window_verdict(window(5.1, was_exhausted=True), flat, NOW, strict=True).passed
    assert reason(window(5, was_exhausted=True), strict=True, settings=flat) is (
        SkipReason.QUOTA_EXHAUSTED
    )


# --- quota_verdict: several windows ----------------------------------------------------------


def test_no_window_is_missing_for_subscription_and_open_for_thrifty() -> None:
    assert quota_verdict([], DEFAULTS, NOW, strict=True).reason is SkipReason.QUOTA_MISSING
    assert quota_verdict([], DEFAULTS, NOW, strict=False) == PASS


def test_all_windows_pass_and_headroom_is_the_tightest() -> None:
    windows = [window(70, name="5h"), window(20, name="7d"), window(45, name="opus")]
    verdict = quota_verdict(windows, DEFAULTS, NOW, strict=True)
    assert verdict.passed
    assert verdict.headroom == 20


def test_one_failing_window_fails_the_connection() -> None:
    windows = [window(70, name="5h"), window(70, name="7d", age=600)]
    verdict = quota_verdict(windows, DEFAULTS, NOW, strict=True)
    assert verdict.reason is SkipReason.QUOTA_STALE
    assert verdict.detail.startswith("7d:")


def test_exhaustion_outranks_staleness_whichever_comes_first() -> None:
    stale, exhausted = window(70, name="5h", age=600), window(0, name="7d", resets_in=60)
    for windows in ([stale, exhausted], [exhausted, stale]):
        assert quota_verdict(windows, DEFAULTS, NOW, strict=True).reason is (
            SkipReason.QUOTA_EXHAUSTED
        )


def test_several_exhausted_windows_report_the_latest_reset() -> None:
    windows = [
        window(0, name="5h", resets_in=600),
        window(1, name="7d", resets_in=86_400),
        window(4, name="opus", resets_in=3_600, was_exhausted=True),
    ]
    verdict = quota_verdict(windows, BAND, NOW, strict=False)
    assert verdict.reason is SkipReason.QUOTA_EXHAUSTED
    assert verdict.resets_at == NOW + 86_400


# --- health_verdict: cooldown and breaker ----------------------------------------------------


@pytest.mark.parametrize("strict", [True, False])
def test_cooldown_in_the_future_blocks_and_reports_its_end(strict: bool) -> None:
    verdict = health_verdict(state(cooldown_for=30, cooldown_reason="429"), NOW, strict=strict)
    assert verdict.reason is SkipReason.COOLDOWN
    assert verdict.resets_at == NOW + 30
    assert verdict.detail == "cooling down for 30s more (429)"


@pytest.mark.parametrize("cooldown_for", [0.0, -1.0])
def test_cooldown_that_has_ended_does_not_block(cooldown_for: float) -> None:
    assert health_verdict(state(cooldown_for=cooldown_for), NOW, strict=True) == PASS


def test_cooldown_is_reported_before_an_open_breaker() -> None:
    health = state(cooldown_for=5, breaker=BreakerState.OPEN)
    assert health_verdict(health, NOW, strict=True).reason is SkipReason.COOLDOWN


@pytest.mark.parametrize("strict", [True, False])
def test_open_breaker_blocks_both_ladders(strict: bool) -> None:
    verdict = health_verdict(state(breaker=BreakerState.OPEN), NOW, strict=strict)
    assert verdict.reason is SkipReason.BREAKER_OPEN


def test_half_open_breaker_blocks_subscription_but_lets_thrifty_probe() -> None:
    half_open = state(breaker=BreakerState.HALF_OPEN)
    assert health_verdict(half_open, NOW, strict=True).reason is SkipReason.BREAKER_HALF_OPEN
    assert health_verdict(half_open, NOW, strict=False) == PASS


def test_closed_breaker_and_no_cooldown_pass() -> None:
    assert health_verdict(state(), NOW, strict=True) == PASS


# --- disabled_verdict: the operator's switch --------------------------------------------------


def test_disabled_connection_fails_its_gate_with_the_fix() -> None:
    verdict = disabled_verdict(replace(FRESH, disabled=True))
    assert verdict.reason is SkipReason.DISABLED
    assert "rungway connections enable" in verdict.detail
    assert disabled_verdict(FRESH) == PASS


@pytest.mark.parametrize("auto_id", ["auto/subscription", "auto/thrifty"])
def test_a_disabled_healthy_connection_is_skipped_as_disabled_by_both_ladders(
    auto_id: str,
) -> None:
    roster = [connection("plan"), connection("paid", "metered-co", "apikey")]
    states = {"plan": replace(FRESH, disabled=True), "paid": FRESH}
    plan = route(auto_id, roster, states)
    assert all("plan" not in c.connection_ids for c in plan.candidates)
    assert skip_reasons(plan, "plan") == [SkipReason.DISABLED]
    enabled = route(auto_id, roster, {**states, "plan": FRESH})
    assert "plan" in enabled.candidates[0].connection_ids


def test_a_disabled_plan_leaves_subscription_unavailable_not_waiting() -> None:
    plan = route("auto/subscription", [connection("plan")], {"plan": replace(FRESH, disabled=True)})
    assert plan.candidates == ()
    assert not plan.subscription_exhausted, "no reset will bring a disabled plan back"


# --- subscription_verdict --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("billing", "overage", "expected"),
    [
        (BillingClass.SUBSCRIPTION, Overage.HARD_STOP, None),
        (BillingClass.SUBSCRIPTION, Overage.METERS_TO_PAID, SkipReason.OVERAGE_NOT_HARD_STOP),
        (BillingClass.SUBSCRIPTION, Overage.UNKNOWN, SkipReason.OVERAGE_NOT_HARD_STOP),
        (BillingClass.KEYLESS, Overage.HARD_STOP, SkipReason.NOT_SUBSCRIPTION),
        (BillingClass.METERED, Overage.METERS_TO_PAID, SkipReason.NOT_SUBSCRIPTION),
        (BillingClass.UNKNOWN, Overage.UNKNOWN, SkipReason.NOT_SUBSCRIPTION),
    ],
)
def test_only_hard_stop_subscriptions_pass_the_plan_gate(
    billing: BillingClass, overage: Overage, expected: SkipReason | None
) -> None:
    verdict = subscription_verdict(BillingVerdict(billing, overage, "why", "test entry"))
    assert verdict.reason is expected
    if expected is not None:
        assert "(test entry)" in verdict.detail


# --- budget_verdict --------------------------------------------------------------------------


def test_rung_without_a_budget_is_never_gated() -> None:
    spend = {Rung.CHEAP: RungSpend(1_000_000.0)}
    assert budget_verdict(Rung.CHEAP, DEFAULTS, spend) == PASS


def test_budget_zero_disables_the_rung_without_any_spend_data() -> None:
    settings = LadderSettings(rung_budget_usd={"premium": 0})
    verdict = budget_verdict(Rung.PREMIUM, settings, {})
    assert verdict.reason is SkipReason.BUDGET_DISABLED
    assert verdict.detail == "rung_budget_usd.premium is 0"


@pytest.mark.parametrize(
    ("spend", "expected"),
    [
        (None, None),
        (RungSpend(4.99), None),
        (RungSpend(5.0), SkipReason.BUDGET_EXHAUSTED),
        (RungSpend(6.0), SkipReason.BUDGET_EXHAUSTED),
        (RungSpend(4.0, reserved_usd=0.99), None),
        (RungSpend(4.0, reserved_usd=1.0), SkipReason.BUDGET_EXHAUSTED),
    ],
    ids=["no-spend", "under", "at", "over", "reserved-under", "reserved-at"],
)
def test_positive_budget_gates_on_spend_plus_reservations(
    spend: RungSpend | None, expected: SkipReason | None
) -> None:
    settings = LadderSettings(rung_budget_usd={"cheap": 5.0}, budget_period="week")
    verdict = budget_verdict(Rung.CHEAP, settings, {} if spend is None else {Rung.CHEAP: spend})
    assert verdict.reason is expected
    if expected is not None:
        assert verdict.detail.endswith("of $5.00 (week)")


def test_a_budget_applies_to_its_own_rung_only() -> None:
    settings = LadderSettings(rung_budget_usd={"cheap": 0, "premium": None})
    assert budget_verdict(Rung.PREMIUM, settings, {}) == PASS


def test_paid_rungs_are_budgeted_by_default_and_null_means_no_limit() -> None:
    defaults = LadderSettings()
    assert budget_verdict(Rung.CHEAP, defaults, {Rung.CHEAP: RungSpend(5.0)}).reason is (
        SkipReason.BUDGET_EXHAUSTED
    )
    assert budget_verdict(Rung.PREMIUM, defaults, {}).reason is SkipReason.BUDGET_DISABLED
    assert defaults.unlimited_paid_rungs() == []
    # Naming one rung keeps the other's default; only an explicit null lifts a limit.
    cheap_only = LadderSettings.model_validate({"rung_budget_usd": {"cheap": 20}})
    assert cheap_only.budget_for(Rung.PREMIUM) == 0
    open_premium = LadderSettings.model_validate({"rung_budget_usd": {"premium": None}})
    assert open_premium.budget_for(Rung.CHEAP) == 5
    assert open_premium.budget_for(Rung.PREMIUM) is None
    assert open_premium.unlimited_paid_rungs() == [Rung.PREMIUM]
    assert budget_verdict(Rung.PREMIUM, open_premium, {Rung.PREMIUM: RungSpend(1e6)}) == PASS


# --- LadderSettings --------------------------------------------------------------------------


def test_defaults_are_the_documented_tuning() -> None:
    assert DEFAULTS.exit_cutoff_percent == 2
    assert DEFAULTS.reentry_min_remaining_percent == 5
    assert DEFAULTS.max_state_age_s == 180
    assert LadderSettings().rung_budget_usd == {"cheap": 5.0, "premium": 0.0}
    assert DEFAULTS.budget_period == "month"


def test_budget_for_reads_a_rung_by_its_label() -> None:
    settings = LadderSettings(rung_budget_usd={"cheap": 5.0, "premium": 0})
    assert settings.budget_for(Rung.CHEAP) == 5.0
    assert settings.budget_for(Rung.PREMIUM) == 0
    assert settings.budget_for(Rung.FREE) is None


@pytest.mark.parametrize(
    "section",
    [
        {"enabled": True},
        {"exit_cutoff_percent": -1},
        {"exit_cutoff_percent": 101},
        {"exit_cutoff_percent": 10, "reentry_min_remaining_percent": 5},
        {"max_state_age_s": 0},
        {"rung_budget_usd": {"cheap": -1}},
        {"rung_budget_usd": {"gold": 5}},
        {"budget_period": "year"},
    ],
    ids=[
        "switch",
        "negative-cutoff",
        "cutoff-over-100",
        "reentry-below-exit",
        "zero-age",
        "negative-budget",
        "unknown-rung",
        "unknown-period",
    ],
)
def test_bad_ladder_settings_are_refused(section: dict[str, object]) -> None:
    with pytest.raises(pydantic.ValidationError):
        LadderSettings.model_validate(section)


def test_settings_are_frozen() -> None:
    with pytest.raises(pydantic.ValidationError):
        DEFAULTS.exit_cutoff_percent = 3


# --- Live overage (a Copilot-like seat) -----------------------------------------------------

SEAT_CATALOG = Catalog(
    [CatalogEntry("seat", None, BillingClass.SUBSCRIPTION, LIVE, "allowance", "test")]
)


@pytest.mark.parametrize(
    ("permitted", "admitted"),
    [(False, True), (True, False), (None, False)],
    ids=["overage-refused", "overage-permitted", "not-read-yet"],
)
def test_subscription_admits_a_live_overage_seat_only_when_it_hard_stops(
    permitted: bool | None, admitted: bool
) -> None:
    seat = connection("seat-1", "seat", "oauth", catalog=SEAT_CATALOG)
    seat_state = replace(FRESH, overage_permitted=permitted)
    plan = route("auto/subscription", [seat], {"seat-1": seat_state})
    assert bool(plan.candidates) is admitted
    if not admitted:
        assert skip_reasons(plan, "seat-1") == [SkipReason.OVERAGE_NOT_HARD_STOP]


def test_thrifty_keeps_a_live_overage_seat_on_the_subscription_rung() -> None:
    seat = connection("seat-1", "seat", "oauth", catalog=SEAT_CATALOG)
    seat_state = replace(FRESH, overage_permitted=True)
    plan = route("auto/thrifty", [seat], {"seat-1": seat_state})
    assert [(c.rung, c.connection_ids) for c in plan.candidates] == [
        (Rung.SUBSCRIPTION, ("seat-1",))
    ]
