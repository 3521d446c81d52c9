"""The what-if types refuse values a replay could not use, naming what is wrong."""

from __future__ import annotations

import pytest

from rungway.whatif.outcome import Placement, PolicyRun
from rungway.whatif.plans import KNOWN_PLANS, PlanError, PlanQuota, PlanWindow
from rungway.whatif.trace import TraceError, TraceRequest, check_trace


def _request(at: object = 0.0, **fields: object) -> TraceRequest:
    values: dict[str, object] = {
        "at": at,
        "model": "auto/thrifty",
        "api": "anthropic_messages",
        "input_tokens": 10,
        "output_tokens": 5,
    }
    values.update(fields)
    return TraceRequest(**values)  # type: ignore[arg-type]


def test_a_request_counts_every_token_it_moved() -> None:
    request = _request(cache_read_tokens=3, cache_write_tokens=2, reasoning_tokens=4)
    assert request.tokens == 10 + 5 + 3 + 2


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"api": "smtp"}, "api"),
        ({"model": ""}, "model"),
        ({"input_tokens": -1}, "input_tokens"),
        ({"output_tokens": 1.5}, "output_tokens"),
        ({"cache_read_tokens": True}, "cache_read_tokens"),
        ({"reasoning_tokens": 6}, "reasoning_tokens"),
        ({"at": float("nan")}, "at"),
    ],
)
def test_a_request_refuses_a_bad_field_by_name(fields: dict[str, object], named: str) -> None:
    with pytest.raises(TraceError, match=named):
        _request(**fields)


def test_a_trace_out_of_time_order_is_refused_at_the_first_step_back() -> None:
    in_order = (_request(1.0), _request(1.0), _request(2.0))
    assert check_trace(in_order) is in_order
    with pytest.raises(TraceError, match=r"request 2 at 1\.5 comes before request 1"):
        check_trace((_request(1.0), _request(2.0), _request(1.5)))


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"length_s": 0}, "length"),
        ({"capacity": -3}, "capacity"),
        ({"unit": "messages"}, "unit"),
        ({"alignment": "weekly"}, "alignment"),
        ({"zone": "Mars/Olympus"}, "time zone"),
        ({"name": ""}, "name"),
    ],
)
def test_a_window_refuses_what_cannot_be_simulated(fields: dict[str, object], named: str) -> None:
    values: dict[str, object] = {
        "name": "5h",
        "length_s": 18000.0,
        "capacity": 45.0,
        "unit": "requests",
        "alignment": "first_use",
    }
    values.update(fields)
    with pytest.raises(PlanError, match=named):
        PlanWindow(**values)  # type: ignore[arg-type]


def test_a_plan_needs_windows_with_distinct_names() -> None:
    window = PlanWindow("5h", 18000.0, 45.0, "requests", "first_use")
    with pytest.raises(PlanError, match="at least one window"):
        PlanQuota("claude-plan", ())
    with pytest.raises(PlanError, match="names a window twice"):
        PlanQuota("claude-plan", (window, window))


def test_every_known_plan_is_a_valid_quota() -> None:
    assert {"claude-pro", "claude-max-5x", "claude-max-20x", "chatgpt-plus"} <= set(KNOWN_PLANS)
    for name, windows in KNOWN_PLANS.items():
        assert PlanQuota(name, windows).windows == windows


def test_a_placement_is_served_or_refused_never_both() -> None:
    Placement(0, "claude-plan", 0, 0.0, 0.02)
    Placement(1, None, None, 0.0, 0.02, refusal="budget")
    with pytest.raises(ValueError, match="either served"):
        Placement(0, "claude-plan", 0, 0.0, 0.02, refusal="budget")
    with pytest.raises(ValueError, match="either served"):
        Placement(0, None, None, 0.0, 0.02)
    with pytest.raises(ValueError, match="cost_usd"):
        Placement(0, "claude-api", 1, -0.5, 0.02)


def test_a_run_holds_one_placement_per_request_in_order() -> None:
    first = Placement(0, "claude-plan", 0, 0.0, 0.02)
    second = Placement(1, "claude-api", 1, 0.02, 0.02)
    PolicyRun("ladder", (first, second), times=(0.0, 1.0))
    with pytest.raises(ValueError, match="is for request 1"):
        PolicyRun("ladder", (second, first))
    with pytest.raises(ValueError, match="one arrival per placement"):
        PolicyRun("ladder", (first, second), times=(0.0,))
