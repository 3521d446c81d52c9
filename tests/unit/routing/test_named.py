"""`gate_named`: a named model's plan, less the connections resting or disabled now."""

from __future__ import annotations

from rungway.routing.named import gate_named
from rungway.routing.plan import Candidate, RoutePlan, SkipReason
from rungway.routing.rungs import Rung
from rungway.routing.snapshot import BreakerState, ConnectionState
from tests.unit.routing.builders import NOW

PLAN = RoutePlan(
    "claude-sonnet-4-5",
    None,
    None,
    (
        Candidate("anthropic", "claude-sonnet-4-5", Rung.SUBSCRIPTION, ("plan",)),
        Candidate("anthropic", "claude-sonnet-4-5", Rung.PREMIUM, ("api",)),
    ),
    (),
)


def _ids(plan: RoutePlan) -> list[str]:
    return [candidate.connection_ids[0] for candidate in plan.candidates]


def test_healthy_connections_leave_the_plan_untouched() -> None:
    healthy = {"plan": ConnectionState(cooldown_until=NOW - 1), "api": ConnectionState()}
    assert gate_named(PLAN, healthy, NOW) is PLAN


def test_a_cooling_connection_is_skipped_with_its_end() -> None:
    cooling = ConnectionState(cooldown_until=NOW + 600, cooldown_reason="quota_exhausted: 5h")
    gated = gate_named(PLAN, {"plan": cooling}, NOW)
    assert _ids(gated) == ["api"]
    (skip,) = gated.skipped
    assert (skip.reason, skip.connection_id, skip.rung) == (
        SkipReason.COOLDOWN,
        "plan",
        Rung.SUBSCRIPTION,
    )
    assert skip.resets_at == NOW + 600
    assert "quota_exhausted: 5h" in skip.detail


def test_an_open_breaker_is_skipped_and_a_half_open_one_takes_the_probe() -> None:
    opened = ConnectionState(breaker=BreakerState.OPEN, breaker_open_until=NOW + 30)
    gated = gate_named(PLAN, {"api": opened}, NOW)
    assert _ids(gated) == ["plan"]
    assert [s.reason for s in gated.skipped] == [SkipReason.BREAKER_OPEN]
    half_open = ConnectionState(breaker=BreakerState.HALF_OPEN)
    assert gate_named(PLAN, {"api": half_open}, NOW) is PLAN


def test_when_every_connection_rests_the_earliest_end_is_the_reset() -> None:
    states = {
        "plan": ConnectionState(cooldown_until=NOW + 600),
        "api": ConnectionState(breaker=BreakerState.OPEN, breaker_open_until=NOW + 30),
    }
    gated = gate_named(PLAN, states, NOW)
    assert gated.candidates == ()
    assert gated.earliest_reset == NOW + 30


def test_disabled_connections_have_no_end() -> None:
    states = {"plan": ConnectionState(disabled=True), "api": ConnectionState(disabled=True)}
    gated = gate_named(PLAN, states, NOW)
    assert gated.candidates == ()
    assert [s.reason for s in gated.skipped] == [SkipReason.DISABLED, SkipReason.DISABLED]
    assert gated.earliest_reset is None
    mixed = gate_named(
        PLAN,
        {"plan": ConnectionState(disabled=True), "api": ConnectionState(cooldown_until=NOW + 9)},
        NOW,
    )
    assert mixed.earliest_reset == NOW + 9, "a resting connection comes back; a disabled one not"
