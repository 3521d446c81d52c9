"""The synthetic profiles: reproducible by seed, at the hours they promise, shaped like a
coding agent's requests, and binding the windows each one says it binds."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from rungway.whatif.plans import KNOWN_PLANS, PlanWindow
from rungway.whatif.synthetic import DEFAULT_START, PROFILES, generate
from rungway.whatif.trace import Trace, TraceError


def _filled(trace: Trace, windows: Sequence[PlanWindow]) -> dict[str, int]:
    """How many instances of each first-use request window filled to capacity when every
    request goes to the plan while all its windows have room (an independent model)."""
    start: dict[str, float | None] = {window.name: None for window in windows}
    used = {window.name: 0.0 for window in windows}
    filled = {window.name: 0 for window in windows}
    for request in trace:
        for window in windows:
            began = start[window.name]
            if began is not None and request.at >= began + window.length_s:
                filled[window.name] += used[window.name] >= window.capacity
                start[window.name], used[window.name] = None, 0.0
        if all(used[window.name] + 1 <= window.capacity for window in windows):
            for window in windows:
                if start[window.name] is None:
                    start[window.name] = request.at
                used[window.name] += 1
    return filled


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_a_seed_gives_the_same_trace_and_another_seed_another(profile: str) -> None:
    trace = generate(profile, requests=2_000, seed=7)
    assert len(trace) == 2_000
    assert trace == generate(profile, requests=2_000, seed=7)
    assert trace != generate(profile, requests=2_000, seed=8)
    assert all(trace[i - 1].at <= trace[i].at for i in range(1, len(trace)))
    assert trace[0].at >= DEFAULT_START


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_requests_are_shaped_like_a_coding_agents(profile: str) -> None:
    trace = generate(profile, requests=5_000, seed=1)
    main = [request for request in trace if request.model == "claude-sonnet-4-5"]
    side = [request for request in trace if request.model == "claude-haiku-4-5"]
    assert len(main) + len(side) == len(trace)
    assert 0.1 < len(side) / len(trace) < 0.2
    # Large cached inputs, a few uncached tokens, modest outputs.
    assert statistics.median(r.cache_read_tokens for r in main) > 20_000
    assert statistics.median(r.input_tokens for r in main) < 100
    assert 200 < statistics.median(r.output_tokens for r in main) < 1_000
    assert max(r.cache_read_tokens + r.cache_write_tokens for r in main) <= 200_000
    # Side requests use no cache.
    assert all(r.cache_read_tokens == r.cache_write_tokens == 0 for r in side)
    assert {(r.api, r.stream) for r in trace} == {("anthropic_messages", True)}


def test_steady_is_an_even_working_day_in_its_zone() -> None:
    zone = ZoneInfo("America/New_York")
    trace = generate("steady", requests=3_000, seed=3, zone="America/New_York")
    local = [datetime.fromtimestamp(request.at, zone) for request in trace]
    assert all(moment.weekday() < 5 and 9 <= moment.hour < 17 for moment in local)
    per_day: dict[object, int] = {}
    for moment in local:
        per_day[moment.date()] = per_day.get(moment.date(), 0) + 1
    full_days = sorted(per_day.values())[1:-1]  # the last day is cut short
    assert 150 < statistics.mean(full_days) < 250
    assert max(full_days) < 2 * min(full_days)


def test_bursty_turns_come_in_quick_runs_with_long_idle_gaps() -> None:
    trace = generate("bursty", requests=5_000, seed=4)
    gaps = [trace[i].at - trace[i - 1].at for i in range(1, len(trace))]
    assert statistics.median(gaps) < 15
    assert sum(gap > 1_800 for gap in gaps) > 50


def test_weekly_cap_works_every_day_of_the_week() -> None:
    trace = generate("weekly-cap", requests=5_000, seed=5)
    days = {datetime.fromtimestamp(request.at, UTC).weekday() for request in trace}
    assert days == set(range(7))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_profile_binds_the_claude_max_5x_windows_it_says(seed: int) -> None:
    windows = KNOWN_PLANS["claude-max-5x"]
    assert [(window.name, window.unit) for window in windows] == [
        ("5h", "requests"),
        ("7d", "requests"),
    ]
    steady = _filled(generate("steady", requests=8_000, seed=seed), windows)
    bursty = _filled(generate("bursty", requests=8_000, seed=seed), windows)
    weekly = _filled(generate("weekly-cap", requests=8_000, seed=seed), windows)
    assert steady == {"5h": 0, "7d": 0}
    assert bursty["5h"] > 0
    assert bursty["7d"] == 0
    # 8,000 requests are two weeks of weekly-cap: the 7-day window fills in each before
    # it resets.
    assert weekly["7d"] >= 1


def test_an_unknown_profile_or_a_negative_count_is_a_trace_error() -> None:
    with pytest.raises(TraceError, match="no profile 'spiky': choose one of steady"):
        generate("spiky", requests=10)
    with pytest.raises(TraceError, match="requests must be at least 0"):
        generate("steady", requests=-1)
    assert generate("steady", requests=0) == ()
