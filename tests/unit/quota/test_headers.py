"""Quota windows read from recorded response headers, and the rules behind them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from multidict import CIMultiDict

from rungway.quota import (
    OverageReading,
    codex_window_name,
    read_anthropic_api_key,
    read_anthropic_overage,
    read_anthropic_unified,
    read_codex,
    read_codex_credits,
    read_x_ratelimit,
)
from rungway.routing.snapshot import QuotaWindow, WindowStatus

from .recorded import assert_windows, recorded

NOW = 1_790_000_000.0

Reader = Callable[[Mapping[str, str], dict[str, Any]], tuple[QuotaWindow, ...]]
READERS: dict[str, Reader] = {
    "anthropic_unified": lambda h, c: read_anthropic_unified(h, model=c["model"], now=c["now"]),
    "anthropic_api_key": lambda h, c: read_anthropic_api_key(h, now=c["now"]),
    "x_ratelimit": lambda h, c: read_x_ratelimit(h, now=c["now"]),
    "codex": lambda h, c: read_codex(h, now=c["now"]),
}
CASES = recorded(
    "anthropic/quota_headers.json",
    "codex/quota_headers.json",
    "openai/quota_headers.json",
    "groq/quota_headers.json",
    "cerebras/quota_headers.json",
)


@pytest.mark.parametrize("case", CASES)
def test_recorded_headers_read_as_golden_windows(case: dict[str, Any]) -> None:
    windows = READERS[case["reader"]](case["headers"], case)
    assert_windows(windows, case["windows"], now=case["now"], source="header")


OVERAGE_READERS: dict[str, Callable[[Mapping[str, str]], OverageReading]] = {
    "anthropic_unified": read_anthropic_overage,
    "codex": read_codex_credits,
}
OVERAGE_CASES = [case for case in CASES if "overage" in case.values[0]]


@pytest.mark.parametrize("case", OVERAGE_CASES)
def test_recorded_headers_say_whether_the_plan_bills_past_its_quota(case: dict[str, Any]) -> None:
    expected = OverageReading(case["overage"]["permitted"], case["overage"]["in_use"])
    read = OVERAGE_READERS[case["reader"]]
    assert read(case["headers"]) == expected
    shouted = CIMultiDict({name.upper(): value for name, value in case["headers"].items()})
    assert read(shouted) == expected


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"overage-status": "rejected", "overage-disabled-reason": "out_of_credits"},
            (False, False),
        ),
        ({"overage-status": "allowed"}, (True, False)),
        ({"overage-in-use": "true"}, (True, True)),
        ({"overage-status": "garbled"}, (None, False)),
        ({"status": "rejected"}, (None, False)),
    ],
)
def test_anthropic_overage_states(fields: dict[str, str], expected: tuple[bool, bool]) -> None:
    headers = {f"anthropic-ratelimit-unified-{name}": value for name, value in fields.items()}
    assert read_anthropic_overage(headers) == OverageReading(*expected)


@pytest.mark.parametrize(
    ("credits", "used", "expected"),
    [
        (("True", "False"), "100.0", (True, True)),
        (("TRUE", "False"), "99.9", (True, False)),
        (("False", "False"), "100.0", (False, False)),
        (("yes", "maybe"), "100.0", (None, False)),
    ],
)
def test_codex_credits_states(
    credits: tuple[str, str], used: str, expected: tuple[bool | None, bool]
) -> None:
    headers = {
        "x-codex-primary-used-percent": used,
        "x-codex-credits-has-credits": credits[0],
        "x-codex-credits-unlimited": credits[1],
    }
    assert read_codex_credits(headers) == OverageReading(*expected)


@pytest.mark.parametrize("case", CASES)
def test_a_case_insensitive_multidict_reads_the_same(case: dict[str, Any]) -> None:
    shouted = CIMultiDict({name.upper(): value for name, value in case["headers"].items()})
    windows = READERS[case["reader"]](shouted, case)
    assert_windows(windows, case["windows"], now=case["now"], source="header")


# --- Anthropic unified ------------------------------------------------------------------------


def unified(**fields: str) -> dict[str, str]:
    return {
        f"anthropic-ratelimit-unified-{name.replace('__', '-')}": value
        for name, value in fields.items()
    }


def test_unified_utilization_is_a_fraction_not_a_percent() -> None:
    (window,) = read_anthropic_unified(
        unified(**{"5h-utilization": "0.42", "5h-status": "allowed"}), model="m", now=NOW
    )
    assert window.used_percent == pytest.approx(42.0)


def test_unified_window_without_status_is_allowed_when_usage_is_known() -> None:
    windows = read_anthropic_unified(
        unified(**{"5h-utilization": "0.5", "7d-reset": "1790400000"}), model="m", now=NOW
    )
    statuses = {window.name: window.status for window in windows}
    assert statuses == {"5h": WindowStatus.ALLOWED, "7d": WindowStatus.UNKNOWN}


def test_unified_unrecognised_status_is_unknown() -> None:
    (window,) = read_anthropic_unified(
        unified(**{"5h-status": "throttled", "5h-utilization": "0.1"}), model="m", now=NOW
    )
    assert window.status is WindowStatus.UNKNOWN


def test_unified_hyphenated_model_claim_is_model_scoped() -> None:
    (window,) = read_anthropic_unified(
        unified(**{"7d-sonnet-status": "allowed", "7d-sonnet-utilization": "0.2"}),
        model="claude-sonnet-5",
        now=NOW,
    )
    assert (window.name, window.model) == ("7d-sonnet", "claude-sonnet-5")
    assert window.used_percent == pytest.approx(20.0)


def test_unified_overall_status_without_a_claim_is_an_account_wide_reading() -> None:
    (window,) = read_anthropic_unified(
        unified(status="rejected", reset="1790003600"), model="m", now=NOW
    )
    assert (window.name, window.model, window.status, window.resets_at) == (
        "unified",
        None,
        WindowStatus.REJECTED,
        1_790_003_600.0,
    )


def test_unified_overall_reset_fills_the_representative_window_gap() -> None:
    headers = unified(
        status="rejected",
        reset="1790003600",
        **{"representative-claim": "five_hour", "5h-utilization": "1.0", "7d-status": "allowed"},
    )
    windows = {w.name: w for w in read_anthropic_unified(headers, model="m", now=NOW)}
    assert windows["5h"].resets_at == 1_790_003_600.0
    assert windows["5h"].status is WindowStatus.REJECTED
    assert windows["7d"].resets_at is None


def test_unified_past_reset_is_clamped_to_now() -> None:
    (window,) = read_anthropic_unified(
        unified(**{"5h-status": "allowed", "5h-reset": "1789990000"}), model="m", now=NOW
    )
    assert window.resets_at == NOW


# --- bucket headers ---------------------------------------------------------------------------


def test_bucket_needs_both_limit_and_remaining() -> None:
    headers = {"x-ratelimit-limit-requests": "60", "x-ratelimit-reset-requests": "1s"}
    assert read_x_ratelimit(headers, now=NOW) == ()


def test_bucket_with_a_zero_limit_has_no_usage_figure() -> None:
    headers = {"x-ratelimit-limit-requests": "0", "x-ratelimit-remaining-requests": "0"}
    (window,) = read_x_ratelimit(headers, now=NOW)
    assert (window.used_percent, window.status) == (None, WindowStatus.UNKNOWN)


def test_overdrawn_bucket_is_clamped_to_full() -> None:
    headers = {
        "anthropic-ratelimit-tokens-limit": "1000",
        "anthropic-ratelimit-tokens-remaining": "-50",
    }
    (window,) = read_anthropic_api_key(headers, now=NOW)
    assert (window.used_percent, window.resets_at) == (100.0, None)


def test_unparseable_bucket_numbers_are_ignored() -> None:
    headers = {"x-ratelimit-limit-tokens": "lots", "x-ratelimit-remaining-tokens": "nan"}
    assert read_x_ratelimit(headers, now=NOW) == ()


# --- Codex ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("minutes", "name"),
    [
        (300, "5h"),
        (299, "5h"),
        (10_080, "7d"),
        (10_079, "7d"),
        (60, "60m"),
        (290, "290m"),
        (1, "1m"),
    ],
)
def test_codex_windows_are_named_by_length(minutes: int, name: str) -> None:
    assert codex_window_name(minutes) == name


def test_codex_skips_a_slot_with_no_data_like_the_first_party_client() -> None:
    headers = {
        "x-codex-secondary-used-percent": "0",
        "x-codex-secondary-window-minutes": "0",
        "x-codex-secondary-reset-at": "",
    }
    assert read_codex(headers, now=NOW) == ()


def test_codex_keeps_an_unused_slot_that_has_a_length() -> None:
    headers = {"x-codex-primary-used-percent": "0", "x-codex-primary-window-minutes": "300"}
    (window,) = read_codex(headers, now=NOW)
    assert (window.name, window.used_percent, window.resets_at) == ("5h", 0.0, None)


def test_codex_slot_without_a_length_keeps_its_slot_name() -> None:
    headers = {"x-codex-secondary-used-percent": "55", "x-codex-secondary-reset-at": "1790001000"}
    (window,) = read_codex(headers, now=NOW)
    assert (window.name, window.used_percent, window.resets_at) == (
        "secondary",
        55.0,
        1_790_001_000.0,
    )


def test_codex_slot_without_used_percent_is_no_reading() -> None:
    headers = {"x-codex-primary-window-minutes": "300", "x-codex-primary-reset-at": "1790001000"}
    assert read_codex(headers, now=NOW) == ()


def test_codex_empty_reset_at_falls_back_to_reset_after_seconds() -> None:
    headers = {
        "x-codex-primary-used-percent": "5",
        "x-codex-primary-window-minutes": "300",
        "x-codex-primary-reset-at": "",
        "x-codex-primary-reset-after-seconds": "600",
    }
    (window,) = read_codex(headers, now=NOW)
    assert window.resets_at == NOW + 600
