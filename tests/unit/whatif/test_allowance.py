"""A plan's simulated windows: alignment, units, per-model windows, and what they report."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from rungway.whatif.allowance import Allowance
from rungway.whatif.plans import PlanError, PlanQuota, PlanWindow
from rungway.whatif.trace import TraceRequest
from rungway.whatif.upstream import SimulatedUpstream

T0 = 1_790_000_000.0


def _request(at: float, tokens: int = 100) -> TraceRequest:
    return TraceRequest(at, "auto/thrifty", "anthropic_messages", tokens - 10, 10)


def _fill(
    allowance: Allowance, times: list[float], model: str = "m", cost: float = 0.0
) -> list[bool]:
    admitted = []
    for at in times:
        ok = allowance.admits(model, at)
        if ok:
            allowance.charge(model, _request(at), cost, at)
        admitted.append(ok)
    return admitted


def test_a_first_use_window_starts_at_the_first_request_after_the_last_one_ended() -> None:
    window = PlanWindow("5h", 100.0, 2, "requests", "first_use")
    allowance = Allowance(PlanQuota("p", (window,)))
    assert _fill(allowance, [T0 + 10, T0 + 20, T0 + 30, T0 + 109, T0 + 110, T0 + 500]) == [
        True,
        True,
        False,
        False,
        True,
        True,
    ]
    uses = allowance.finish(T0 + 600)
    assert [(u.start, u.end, u.used) for u in uses] == [
        (T0 + 10, T0 + 110, 2),
        (T0 + 110, T0 + 210, 1),
        (T0 + 500, T0 + 600, 1),
    ]


def test_a_fixed_window_resets_on_its_grid_whenever_requests_come() -> None:
    window = PlanWindow("h", 100.0, 1, "requests", "fixed", anchor=T0)
    allowance = Allowance(PlanQuota("p", (window,)))
    assert _fill(allowance, [T0 + 99, T0 + 99.5, T0 + 100, T0 + 250]) == [True, False, True, True]
    assert [u.start for u in allowance.finish(T0 + 260)] == [T0, T0 + 100, T0 + 200]


def test_a_midnight_window_resets_at_midnight_in_its_zone() -> None:
    zone = ZoneInfo("America/Los_Angeles")
    before = datetime(2026, 3, 8, 23, 59, tzinfo=zone).timestamp()
    after = datetime(2026, 3, 9, 0, 1, tzinfo=zone).timestamp()
    window = PlanWindow("1d", 86400.0, 1, "requests", "midnight", zone="America/Los_Angeles")
    allowance = Allowance(PlanQuota("p", (window,)))
    assert _fill(allowance, [before, before + 30, after]) == [True, False, True]
    first = allowance.finish(after)[0]
    assert datetime.fromtimestamp(first.end, zone).hour == 0
    # A day across the change to summer time is 23 hours long.
    assert first.end - first.start == 23 * 3600


def test_token_and_cost_windows_count_their_unit() -> None:
    tokens = PlanWindow("t", 1000.0, 250, "tokens", "fixed", anchor=T0)
    dollars = PlanWindow("c", 1000.0, 0.05, "cost", "fixed", anchor=T0)
    allowance = Allowance(PlanQuota("p", (tokens, dollars)))
    assert _fill(allowance, [T0 + 1, T0 + 2, T0 + 3, T0 + 4], cost=0.02) == [
        True,
        True,
        True,
        False,
    ]
    used = {u.window: u.used for u in allowance.finish(T0 + 5)}
    assert used["t"] == 300
    assert used["c"] == pytest.approx(0.06)
    reading = allowance.admission("m", T0 + 5, admitted=False).readings[1]
    assert reading.capacity == 50_000
    assert reading.used == 60_000


def test_a_per_model_window_counts_and_blocks_its_model_only() -> None:
    opus = PlanWindow("7d_opus", 1000.0, 1, "requests", "fixed", model="opus")
    allowance = Allowance(PlanQuota("p", (opus,)))
    assert _fill(allowance, [T0, T0 + 1], model="opus") == [True, False]
    assert _fill(allowance, [T0 + 2, T0 + 3], model="sonnet") == [True, True]


def test_a_claude_plan_reports_its_windows_as_5h_and_7d() -> None:
    windows = (
        PlanWindow("week", 7 * 86400.0, 100, "requests", "first_use"),
        PlanWindow("session", 5 * 3600.0, 10, "requests", "first_use"),
    )
    upstream = SimulatedUpstream("anthropic", PlanQuota("p", windows))
    assert upstream.header_names == {"week": "7d", "session": "5h"}
    allowance = Allowance(PlanQuota("p", windows), upstream.header_names)
    allowance.charge("m", _request(T0), 0.0, T0)
    headers = upstream.success(allowance.admission("m", T0, admitted=True)).headers
    assert headers["anthropic-ratelimit-unified-5h-utilization"] == "0.1"
    assert headers["anthropic-ratelimit-unified-7d-utilization"] == "0.01"
    refusal = upstream.refusal("m", allowance.admission("m", T0, admitted=False))
    assert refusal.status == 429
    assert b"rate_limit_error" in refusal.body


def test_a_claude_plan_with_three_account_windows_is_refused() -> None:
    windows = tuple(
        PlanWindow(f"w{i}", 3600.0 * (i + 1), 10, "requests", "fixed") for i in range(3)
    )
    with pytest.raises(PlanError, match="at most 2 account-wide windows"):
        SimulatedUpstream("anthropic", PlanQuota("p", windows))
    assert datetime.fromtimestamp(T0, UTC).year == 2026
