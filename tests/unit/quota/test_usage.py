"""Readings of plan and credit usage endpoints: golden bodies, malformed bodies, and fuzzing."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rungway.quota import (
    PolledReading,
    read_codex_usage,
    read_copilot_user,
    read_gemini_quota,
    read_openrouter_key,
)
from rungway.quota.usage import read_claude_usage
from rungway.routing.snapshot import QuotaWindow, WindowStatus

from .recorded import FIXTURES, assert_windows, body_of, recorded

NOW = 1_790_208_000.0  # 2026-09-24T00:00:00Z, a Thursday

Reader = Callable[..., PolledReading]
READERS: dict[str, Reader] = {
    "claude": read_claude_usage,
    "codex": read_codex_usage,
    "copilot": read_copilot_user,
    "gemini": read_gemini_quota,
    "openrouter": read_openrouter_key,
}
EXAMPLES = settings(deadline=None)


CASES = recorded(
    "usage/claude.json",
    "usage/codex.json",
    "usage/copilot.json",
    "usage/gemini.json",
    "usage/openrouter.json",
)


def read(vendor: str, body: Any, now: float = NOW) -> PolledReading:
    return READERS[vendor](json.dumps(body).encode(), now=now)


@pytest.mark.parametrize("case", CASES)
def test_recorded_bodies_read_as_golden_windows(case: dict[str, Any]) -> None:
    reading = READERS[case["reader"]](body_of(case), now=case["now"])
    assert_windows(reading.windows, case["windows"], now=case["now"], source="poll")
    assert reading.overage_permitted is case.get("overage_permitted")


# --- Codex ------------------------------------------------------------------------------------


def codex_body(**primary: Any) -> dict[str, Any]:
    window = {"used_percent": 8, "limit_window_seconds": 17940, "reset_at": 1_790_210_000}
    window.update(primary)
    return {"rate_limit": {"primary_window": window}}


def test_codex_windows_are_named_by_length_not_slot() -> None:
    body = {
        "rate_limit": {
            "primary_window": {"used_percent": 3, "limit_window_seconds": 604_800},
            "secondary_window": {"used_percent": 9, "limit_window_seconds": 18_000},
        }
    }
    assert [w.name for w in read("codex", body).windows] == ["7d", "5h"]


def test_codex_overshoot_is_clamped_and_rejected() -> None:
    (window,) = read("codex", codex_body(used_percent=104.2)).windows
    assert window.used_percent == 100.0
    assert window.status is WindowStatus.REJECTED


def test_codex_past_reset_is_clamped_to_now() -> None:
    (window,) = read("codex", codex_body(reset_at=1_700_000_000)).windows
    assert window.resets_at == NOW


def test_codex_reads_no_window_from_the_extra_feature_limits() -> None:
    spent = {"primary_window": {"used_percent": 100, "limit_window_seconds": 17940}}
    body = {
        "rate_limit": None,
        "additional_rate_limits": [{"limit_name": "codex_other", "rate_limit": spent}],
        "code_review_rate_limit": spent,
    }
    assert read("codex", body) == PolledReading()


# --- Copilot ----------------------------------------------------------------------------------


def copilot_body(**premium: Any) -> dict[str, Any]:
    return {
        "quota_reset_date_utc": "2026-10-01T00:00:00.000Z",
        "quota_snapshots": {"premium_interactions": premium},
    }


def test_copilot_rounded_remaining_zero_alone_is_spent() -> None:
    reading = read("copilot", copilot_body(remaining=0, percent_remaining=0.2))
    assert reading.windows == (
        QuotaWindow(
            "month", 100.0, 1_790_812_800.0, NOW, status=WindowStatus.REJECTED, source="poll"
        ),
    )
    assert reading.overage_permitted is None


def test_copilot_percent_comes_from_the_entitlement_when_percent_is_absent() -> None:
    (window,) = read("copilot", copilot_body(entitlement=300, remaining=225)).windows
    assert window.used_percent == 25.0
    assert window.status is WindowStatus.ALLOWED


def test_copilot_unlimited_still_reports_overage() -> None:
    reading = read("copilot", copilot_body(unlimited=True, overage_permitted=True))
    assert reading == PolledReading(
        (QuotaWindow("month", 0.0, None, NOW, source="poll"),), overage_permitted=True
    )


def test_copilot_snapshot_without_figures_is_no_window() -> None:
    assert read("copilot", copilot_body(unlimited=False, overage_permitted=False)) == PolledReading(
        (), overage_permitted=False
    )


def test_copilot_free_quota_is_read_only_where_it_can_be_measured() -> None:
    measured = {"limited_user_quotas": {"chat": 0}, "monthly_quotas": {"chat": 50}}
    (window,) = read("copilot", measured).windows
    assert (window.name, window.used_percent, window.status) == (
        "chat",
        100.0,
        WindowStatus.REJECTED,
    )
    assert window.resets_at is None
    # Chat with no allowance to measure against, and completions, which no gateway request
    # uses, give no window.
    unmeasured = {"limited_user_quotas": {"chat": 10, "completions": 0}, "monthly_quotas": {}}
    assert read("copilot", unmeasured).windows == ()


def test_copilot_free_reset_may_be_an_epoch() -> None:
    body = {
        "limited_user_quotas": {"chat": 25},
        "monthly_quotas": {"chat": 50},
        "limited_user_reset_date": 1_790_812_800,
    }
    (window,) = read("copilot", body).windows
    assert (window.used_percent, window.resets_at) == (50.0, 1_790_812_800.0)


# --- Gemini -----------------------------------------------------------------------------------


def test_gemini_equally_spent_buckets_keep_the_later_reset() -> None:
    body = {
        "buckets": [
            {"remainingFraction": 0.0, "modelId": "m", "resetTime": "2026-09-24T08:00:00Z"},
            {"remainingFraction": 0.0, "modelId": "m", "resetTime": "2026-09-25T08:00:00Z"},
            {"remainingFraction": 0.5, "modelId": "m"},
        ]
    }
    (window,) = read("gemini", body).windows
    assert window.status is WindowStatus.REJECTED
    assert window.resets_at == NOW + 32 * 3600  # the later reset: the longer wait


def test_gemini_blank_model_is_account_wide_and_fraction_is_clamped() -> None:
    (window,) = read("gemini", {"buckets": [{"remainingFraction": 1.5, "modelId": " "}]}).windows
    assert (window.model, window.used_percent, window.resets_at) == (None, 0.0, None)


def test_an_overflowing_reset_is_no_reset() -> None:
    bucket = {
        "remainingFraction": 0.5,
        "resetTime": "Wed, 21 Oct 99999999999999999999 07:28:00 GMT",
    }
    (window,) = read("gemini", {"buckets": [bucket]}).windows
    assert (window.used_percent, window.resets_at) == (50.0, None)


# --- OpenRouter -------------------------------------------------------------------------------


def test_openrouter_credit_added_past_the_limit_is_clamped() -> None:
    (window,) = read("openrouter", {"data": {"limit": 10, "limit_remaining": 12}}).windows
    assert window.used_percent == 0.0
    assert window.status is WindowStatus.ALLOWED


def test_openrouter_zero_limit_is_spent() -> None:
    (window,) = read("openrouter", {"data": {"limit": 0, "limit_remaining": 0}}).windows
    assert (window.used_percent, window.status) == (100.0, WindowStatus.REJECTED)


def test_openrouter_without_any_usage_figure_has_no_window() -> None:
    assert read("openrouter", {"data": {"limit": 10}}) == PolledReading()


@pytest.mark.parametrize(
    ("period", "now", "reset"),
    [
        # At exactly midnight (a Monday, the 1st), the period that just began ends next time.
        ("daily", 1_790_553_600.0, 1_790_640_000.0),
        ("weekly", 1_790_553_600.0, 1_791_158_400.0),
        ("monthly", 1_790_812_800.0, 1_793_491_200.0),
        (" Monthly ", 1_790_812_800.0, 1_793_491_200.0),
        ("yearly", 1_790_553_600.0, None),
        (None, 1_790_553_600.0, None),
    ],
)
def test_openrouter_reset_periods(period: str | None, now: float, reset: float | None) -> None:
    body = {"data": {"limit": 10, "limit_remaining": 5, "limit_reset": period}}
    (window,) = read("openrouter", body, now=now).windows
    assert window.resets_at == reset


# --- Malformed input --------------------------------------------------------------------------

MALFORMED = [
    b"",
    b"not json",
    b"{",
    b"null",
    b"[]",
    b'"text"',
    b"42",
    b"{}",
    b'{"rate_limit": 5, "quota_snapshots": [], "buckets": {}, "data": "x"}',
    b'{"rate_limit": {"primary_window": [1]}, "buckets": [1, null, "x"]}',
    b'{"quota_snapshots": {"premium_interactions": "lots"}, "limited_user_quotas": []}',
]


@pytest.mark.parametrize("body", MALFORMED)
@pytest.mark.parametrize("vendor", sorted(READERS))
def test_malformed_bodies_read_as_nothing(vendor: str, body: bytes) -> None:
    assert READERS[vendor](body, now=NOW) == PolledReading()


@pytest.mark.parametrize(
    ("vendor", "body"),
    [
        ("codex", codex_body(used_percent=True)),
        ("copilot", copilot_body(remaining=True, quota_remaining=False, percent_remaining=True)),
        ("copilot", {"limited_user_quotas": {"chat": True}, "monthly_quotas": {"chat": 50}}),
        ("gemini", {"buckets": [{"remainingFraction": False, "modelId": "m"}]}),
        ("openrouter", {"data": {"limit": True, "limit_remaining": 0}}),
        ("openrouter", {"data": {"limit": "10", "limit_remaining": "0"}}),
    ],
)
def test_bools_and_strings_are_not_numbers(vendor: str, body: Any) -> None:
    assert read(vendor, body) == PolledReading()


def test_a_string_overage_flag_is_not_a_flag() -> None:
    assert read("copilot", copilot_body(overage_permitted="true")).overage_permitted is None


def test_claude_reader_survives_odd_limit_lists() -> None:
    body = {"limits": [{"kind": ["session"]}, 5], "five_hour": {"utilization": 40}}
    (window,) = read_claude_usage(json.dumps(body).encode(), now=NOW).windows
    assert (window.name, window.used_percent) == ("5h", 40.0)
    assert read_claude_usage(b'{"limits": 5}', now=NOW) == PolledReading()


def test_usage_reading_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        PolledReading().overage_permitted = True  # type: ignore[misc]


# --- Fuzzing ----------------------------------------------------------------------------------

# The fields the readers look for, so that fuzzed objects reach past the top level.
KEYS = [
    "rate_limit",
    "primary_window",
    "secondary_window",
    "used_percent",
    "limit_window_seconds",
    "reset_at",
    "reset_after_seconds",
    "quota_snapshots",
    "premium_interactions",
    "unlimited",
    "remaining",
    "quota_remaining",
    "percent_remaining",
    "entitlement",
    "overage_permitted",
    "quota_reset_date",
    "quota_reset_date_utc",
    "limited_user_quotas",
    "monthly_quotas",
    "limited_user_reset_date",
    "chat",
    "completions",
    "buckets",
    "remainingFraction",
    "remainingAmount",
    "resetTime",
    "modelId",
    "data",
    "limit",
    "limit_remaining",
    "limit_reset",
    "usage",
    "usage_weekly",
    "limits",
    "kind",
    "utilization",
    "five_hour",
    "resets_at",
]
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(
        ["", "monthly", "weekly", "daily", "2026-10-01", "Wed, 21 Oct 2026 07:28:00 GMT"]
    )
    | st.text(max_size=12)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), inner, max_size=5)
    ),
    max_leaves=30,
)


def golden_bodies() -> list[tuple[str, Any]]:
    return [
        (vendor, case["body"])
        for vendor in READERS
        for case in json.loads((FIXTURES / "usage" / f"{vendor}.json").read_text())
        if "body" in case
    ]


def graft(body: Any, path: list[int], value: Any) -> Any:
    # Replace the value at a pseudo-random place in the body, steered by `path`.
    if not path or not isinstance(body, dict | list) or not body:
        return value
    keys = list(body) if isinstance(body, dict) else list(range(len(body)))
    key = keys[path[0] % len(keys)]
    copy: Any = dict(body) if isinstance(body, dict) else list(body)
    copy[key] = graft(body[key], path[1:], value)
    return copy


def assert_sane(reading: PolledReading, now: float) -> None:
    assert isinstance(reading, PolledReading)
    assert reading.overage_permitted in (None, True, False)
    for window in reading.windows:
        assert window.used_percent is not None
        assert 0.0 <= window.used_percent <= 100.0
        assert window.status in (WindowStatus.ALLOWED, WindowStatus.REJECTED)
        assert window.resets_at is None or (
            math.isfinite(window.resets_at) and window.resets_at >= now
        )
        assert (window.checked_at, window.source) == (now, "poll")


@EXAMPLES
@given(st.binary(max_size=200))
def test_no_reader_raises_on_arbitrary_bytes(body: bytes) -> None:
    for reader in READERS.values():
        assert_sane(reader(body, now=NOW), NOW)


@EXAMPLES
@given(JSON)
def test_no_reader_raises_on_arbitrary_json(value: Any) -> None:
    body = json.dumps(value).encode()
    for reader in READERS.values():
        assert_sane(reader(body, now=NOW), NOW)


@EXAMPLES
@given(st.sampled_from(golden_bodies()), st.lists(st.integers(0, 50), max_size=6), JSON)
def test_no_reader_raises_when_a_golden_body_is_corrupted(
    golden: tuple[str, Any], path: list[int], value: Any
) -> None:
    vendor, body = golden
    assert_sane(read(vendor, graft(body, path, value)), NOW)
