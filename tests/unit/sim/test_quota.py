"""Window accounting against a FakeClock and the three rate-limit header writers."""

from __future__ import annotations

import pytest

from rungway.clock import FakeClock
from rungway.sim import WindowSpec
from rungway.sim.quota.windows import (
    QuotaBook,
    apikey_headers,
    go_duration,
    openai_headers,
    rfc3339,
    unified_headers,
)

START = 1_790_000_000.0


def window(name: str, capacity: int, length_s: float, **extra: object) -> WindowSpec:
    return WindowSpec.model_validate(
        {"name": name, "capacity": capacity, "length_s": length_s, **extra}
    )


def as_dict(headers: list[tuple[bytes, bytes]]) -> dict[str, str]:
    return {name.decode(): value.decode() for name, value in headers}


def test_usage_returns_to_zero_at_the_reset_and_the_next_reset_moves_one_length() -> None:
    clock = FakeClock(START)
    book = QuotaBook([window("5h", 100, 600)], clock)
    assert book.admit("m", 30, 20).admitted
    assert book.readings()[0].used == 50
    clock.advance(599)
    assert book.readings()[0].used == 50
    clock.advance(1)
    (reading,) = book.readings()
    assert reading.used == 0
    assert reading.reset_at == START + 1200


def test_a_clock_jump_skips_whole_lengths() -> None:
    clock = FakeClock(START)
    book = QuotaBook([window("5h", 100, 600, first_reset_at=START + 100)], clock)
    book.admit("m", 50, 0)
    clock.advance(100 + 3 * 600 + 5)
    (reading,) = book.readings()
    assert reading.used == 0
    assert reading.reset_at == START + 100 + 4 * 600


def test_a_request_starting_below_capacity_is_admitted_then_the_window_rejects() -> None:
    clock = FakeClock(START)
    book = QuotaBook([window("tokens", 100, 60)], clock)
    assert book.admit("m", 90, 0).admitted
    overflow = book.admit("m", 90, 0)  # 90 < 100 at start, so it still goes through
    assert overflow.admitted
    rejected = book.admit("m", 1, 0)
    assert not rejected.admitted
    assert rejected.readings[0].used == 180
    assert rejected.retry_after_s() == 60


def test_units_charge_requests_input_or_output_tokens() -> None:
    book = QuotaBook(
        [
            window("requests", 10, 60, unit="requests"),
            window("input-tokens", 1000, 60, unit="input_tokens"),
            window("output-tokens", 1000, 60, unit="output_tokens"),
            window("tokens", 1000, 60, unit="tokens"),
        ],
        FakeClock(START),
    )
    admission = book.admit("m", 7, 5)
    assert [reading.used for reading in admission.readings] == [1, 7, 5, 12]


def test_a_model_scoped_window_only_counts_and_limits_its_model() -> None:
    book = QuotaBook(
        [window("7d", 1000, 604800), window("7d_oi", 10, 604800, model="fable")], FakeClock(START)
    )
    assert book.admit("fable", 10, 0).admitted
    assert not book.admit("fable", 1, 0).admitted
    other = book.admit("sonnet", 1, 0)
    assert other.admitted
    assert [reading.spec.name for reading in other.readings] == ["7d"]


def test_exhaust_fills_the_named_window_until_its_reset() -> None:
    clock = FakeClock(START)
    book = QuotaBook([window("5h", 100, 600), window("7d", 1000, 6000)], clock)
    assert book.exhaust("m", "7d")
    assert not book.exhaust("m", "missing")
    assert not book.admit("m", 1, 0).admitted
    clock.advance(6000)
    assert book.admit("m", 1, 0).admitted


def test_unified_headers_move_from_allowed_to_warning_to_rejected() -> None:
    book = QuotaBook(
        [window("5h", 100, 600, claim="five_hour"), window("7d", 1000, 6000, claim="seven_day")],
        FakeClock(START),
    )
    first = as_dict(unified_headers(book.admit("m", 42, 0)))
    assert first["anthropic-ratelimit-unified-status"] == "allowed"
    assert first["anthropic-ratelimit-unified-5h-utilization"] == "0.42"
    assert first["anthropic-ratelimit-unified-5h-reset"] == str(int(START + 600))
    assert first["anthropic-ratelimit-unified-7d-reset"] == str(int(START + 6000))
    assert first["anthropic-ratelimit-unified-representative-claim"] == "five_hour"
    assert "anthropic-ratelimit-unified-5h-surpassed-threshold" not in first

    warning = as_dict(unified_headers(book.admit("m", 38, 0)))
    assert warning["anthropic-ratelimit-unified-status"] == "allowed_warning"
    assert warning["anthropic-ratelimit-unified-5h-status"] == "allowed_warning"
    assert warning["anthropic-ratelimit-unified-5h-surpassed-threshold"] == "0.75"
    assert warning["anthropic-ratelimit-unified-7d-status"] == "allowed"

    book.admit("m", 30, 0)
    rejected = as_dict(unified_headers(book.admit("m", 1, 0)))
    assert rejected["anthropic-ratelimit-unified-status"] == "rejected"
    assert rejected["anthropic-ratelimit-unified-5h-status"] == "rejected"
    assert rejected["anthropic-ratelimit-unified-5h-utilization"] == "1.0"
    assert rejected["anthropic-ratelimit-unified-reset"] == str(int(START + 600))


def test_apikey_headers_use_rfc3339_resets() -> None:
    book = QuotaBook([window("requests", 50, 60, unit="requests")], FakeClock(START))
    headers = as_dict(apikey_headers(book.admit("m", 1, 1)))
    assert headers == {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-requests-reset": rfc3339(START + 60),
    }
    assert rfc3339(1755780059.2) == "2025-08-21T12:41:00Z"


def test_openai_headers_use_go_durations() -> None:
    clock = FakeClock(START)
    book = QuotaBook(
        [window("requests", 60, 1, unit="requests"), window("tokens", 150000, 360)], clock
    )
    clock.advance(0.5)
    headers = as_dict(openai_headers(book.admit("m", 10, 6)))
    assert headers == {
        "x-ratelimit-limit-requests": "60",
        "x-ratelimit-remaining-requests": "59",
        "x-ratelimit-reset-requests": "500ms",
        "x-ratelimit-limit-tokens": "150000",
        "x-ratelimit-remaining-tokens": "149984",
        "x-ratelimit-reset-tokens": "5m59.5s",
    }


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0, "0s"),
        (0.012, "12ms"),
        (1, "1s"),
        (360, "6m0s"),
        (18.642, "18.642s"),
        (3723.5, "1h2m3.5s"),
        (179.56, "2m59.56s"),
    ],
)
def test_go_duration_matches_go_formatting(seconds: float, expected: str) -> None:
    assert go_duration(seconds) == expected
