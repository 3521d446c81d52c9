"""Every reset spelling in docs/provider-signals.md A9, anchored at a fixed receive time."""

from __future__ import annotations

import pytest

from rungway.quota import parse_duration, parse_reset

NOW = 1_790_000_000.0  # 2026-09-21T14:13:20Z


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("12ms", 0.012),
        ("9ms", 0.009),
        ("18.642s", 18.642),
        ("2m59.56s", 179.56),
        ("7.66s", 7.66),
        ("1h2m3s", 3723.0),
        ("1h", 3600.0),
        ("46m40s", 2800.0),
        ("0.847655010s", 0.84765501),
        ("34.074824224s", 34.074824224),
        ("373.801628ms", 0.373801628),
        ("60s", 60.0),
        ("1.5µs", 1.5e-6),
        ("250ns", 2.5e-7),
        (" 6m0s ", 360.0),
    ],
)
def test_go_and_protobuf_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds, rel=1e-12)


@pytest.mark.parametrize("text", ["", "  ", "5", "1.5", "s", "m", "ms", "6m0", "1d", "-1s", "1s1h"])
def test_not_durations(text: str) -> None:
    assert parse_duration(text) is None


@pytest.mark.parametrize(
    ("value", "relative", "expected"),
    [
        # Epoch seconds and milliseconds in absolute fields.
        ("1790426679", False, 1_790_426_679.0),
        ("1790426679.5", False, 1_790_426_679.5),
        ("1790426679000", False, 1_790_426_679.0),
        ("1790000060000", False, 1_790_000_060.0),
        # A small number where an instant belongs is a delta sent by mistake.
        ("30", False, NOW + 30),
        # Relative fields.
        ("155800", True, NOW + 155_800),
        ("7200", True, NOW + 7200),
        ("11.382867", True, NOW + 11.382867),
        ("0", True, NOW),
        # Durations are always deltas.
        ("6m0s", False, NOW + 360),
        ("12ms", True, NOW + 0.012),
        ("2m59.56s", True, NOW + 179.56),
        # RFC 3339 with Z, offset, fractions; naive taken as UTC.
        ("2026-09-21T14:14:20Z", False, NOW + 60),
        ("2026-09-21T14:14:20.250Z", False, NOW + 60.25),
        ("2026-09-21T16:14:20+02:00", False, NOW + 60),
        ("2026-09-21T14:14:20.000000123+00:00", False, NOW + 60),
        ("2026-09-21T14:14:20", False, NOW + 60),
        # Date only is UTC midnight.
        ("2026-10-01", False, 1_790_812_800.0),
        # HTTP-date.
        ("Mon, 21 Sep 2026 14:14:20 GMT", True, NOW + 60),
        ("Mon, 21 Sep 2026 14:14:20 GMT", False, NOW + 60),
    ],
)
def test_reset_values(value: str, relative: bool, expected: float) -> None:
    assert parse_reset(value, now=NOW, relative=relative) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("value", ["", " ", "soon", "nan", "inf", "2026-13-01", "1e999"])
def test_values_that_name_no_instant(value: str) -> None:
    assert parse_reset(value, now=NOW) is None


@pytest.mark.parametrize(
    ("value", "relative"),
    [
        ("1789990000", False),
        ("2025-08-21T12:40:59Z", False),
        ("Wed, 21 Oct 2015 07:28:00 GMT", True),
        ("-5", True),
    ],
)
def test_an_instant_already_past_is_now(value: str, relative: bool) -> None:
    assert parse_reset(value, now=NOW, relative=relative) == NOW


def test_relative_values_anchor_at_the_given_receive_time() -> None:
    assert parse_reset("60", now=100.0, relative=True) == 160.0
    assert parse_reset("60", now=200.0, relative=True) == 260.0
