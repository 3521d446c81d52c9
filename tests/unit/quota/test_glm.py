"""The GLM Coding Plan's quota endpoint and 429 business codes, read from recorded shapes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rungway.quota.glm import (
    glm_plan_name,
    glm_reset,
    read_glm_error,
    read_glm_tools,
    read_glm_usage,
    window_name,
)
from rungway.routing.snapshot import WindowStatus

FIXTURES = Path(__file__).parents[2] / "fixtures" / "glm"
NOW = datetime(2026, 8, 24, 12, 0, tzinfo=UTC).timestamp()


def _fixture(file: str, name: str) -> bytes:
    data: dict[str, Any] = json.loads((FIXTURES / file).read_text(encoding="utf-8"))
    return orjson.dumps(data[name])


def _utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_the_weekly_window_reads_as_percent_used_and_an_unstarted_5h_window_has_no_reset() -> None:
    body = _fixture("quota_limit.json", "pro_weekly_87")
    now = 1783400000.0
    windows = {window.name: window for window in read_glm_usage(body, now=now).windows}
    assert set(windows) == {"5h", "7d"}
    assert windows["5h"].used_percent == 0.0
    assert windows["5h"].resets_at is None
    assert windows["7d"].used_percent == 87.0
    assert windows["7d"].resets_at == 1783491455.996
    assert all(w.status is WindowStatus.ALLOWED and w.source == "poll" for w in windows.values())
    assert glm_plan_name(body) == "pro"


def test_a_spent_window_given_as_a_string_is_rejected_and_seven_days_is_the_week() -> None:
    body = _fixture("quota_limit.json", "lite_5h_spent_string_percent")
    windows = {window.name: window for window in read_glm_usage(body, now=1783300000.0).windows}
    assert windows["5h"].used_percent == 100.0
    assert windows["5h"].status is WindowStatus.REJECTED
    assert windows["7d"].used_percent == 41.5
    assert glm_plan_name(body) == "Lite Plan"


def test_the_monthly_tool_calls_are_counted_apart_from_the_model_windows() -> None:
    body = _fixture("quota_limit.json", "pro_weekly_87")
    tools = read_glm_tools(body, now=1783400000.0)
    assert tools is not None
    assert (tools.used, tools.allowance) == (43, 1000)
    assert tools.resets_at == 1784269055.973
    names = {window.name for window in read_glm_usage(body, now=1783400000.0).windows}
    assert "month" not in names


def test_an_error_envelope_reads_as_no_windows() -> None:
    body = _fixture("quota_limit.json", "unauthorised")
    assert read_glm_usage(body, now=NOW).windows == ()
    assert read_glm_tools(body, now=NOW) is None


@pytest.mark.parametrize(
    ("unit", "number", "name"),
    [(3, 5, "5h"), (6, 1, "7d"), (4, 7, "7d"), (4, 1, "1d"), (5, 1, "month"), (9, 1, None)],
)
def test_window_names_follow_unit_and_number(unit: int, number: int, name: str | None) -> None:
    assert window_name(unit, number) == name


def test_a_spent_5h_window_resets_at_the_utc_plus_8_time_its_message_names() -> None:
    body = _fixture("errors.json", "1308_five_hours_cn")
    signal = read_glm_error(429, body, now=NOW)
    assert signal.terminal
    (window,) = signal.windows
    # 07:41:44 in UTC+8 on the 25th is 23:41:44 UTC on the 24th: the date rolls back.
    assert window.resets_at == _utc("2026-08-24T23:41:44")
    assert window.name == "5h"
    assert window.status is WindowStatus.REJECTED
    assert signal.retry_after_s == pytest.approx(window.resets_at - NOW)


def test_an_iso_reset_with_its_offset_is_read_as_written() -> None:
    now = _utc("2026-08-10T00:00:00")
    signal = read_glm_error(429, _fixture("errors.json", "1310_weekly_iso"), now=now)
    (window,) = signal.windows
    assert window.resets_at == _utc("2026-08-14T00:00:00")
    assert window.name == "7d"


def test_a_numeric_code_names_its_window_and_a_wall_clock_reset() -> None:
    signal = read_glm_error(429, _fixture("errors.json", "1317_numeric_code"), now=NOW)
    (window,) = signal.windows
    assert window.name == "7d"
    assert window.resets_at == _utc("2026-08-30T01:00:00")


@pytest.mark.parametrize("name", ["1302_concurrency", "1305_overloaded"])
def test_a_throttle_code_is_no_quota_signal(name: str) -> None:
    signal = read_glm_error(429, _fixture("errors.json", name), now=NOW)
    assert signal.windows == ()
    assert not signal.terminal


def test_an_expired_plan_is_terminal_without_a_window() -> None:
    signal = read_glm_error(429, _fixture("errors.json", "1309_expired"), now=NOW)
    assert signal.terminal
    assert signal.windows == ()


def test_a_time_alone_is_its_next_occurrence_in_utc_plus_8() -> None:
    # NOW is 20:00 in UTC+8: 21:30 is later today, 07:00 tomorrow.
    assert glm_reset("resets at 21:30", now=NOW) == _utc("2026-08-24T13:30:00")
    assert glm_reset("您的限额将在 07:00:00 重置", now=NOW) == _utc("2026-08-24T23:00:00")


def test_a_past_or_missing_reset_is_now_or_none() -> None:
    assert glm_reset("将在 2020-01-01 00:00:00 重置", now=NOW) == NOW
    assert glm_reset("no time here", now=NOW) is None
    assert glm_reset("at 2026-13-45 99:99:99", now=NOW) is None


_FIELDS = st.sampled_from(
    ["type", "unit", "number", "percentage", "nextResetTime", "usage", "currentValue", "code"]
) | st.text(max_size=4)
_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["TOKENS_LIMIT", "TIME_LIMIT", "1308", "将在 2026-08-25 07:41:44 重置"])
)


@given(
    st.recursive(
        _LEAVES,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_FIELDS, inner, max_size=5),
        max_leaves=10,
    )
)
def test_the_readers_never_raise_on_any_json(value: Any) -> None:
    body = orjson.dumps({"data": {"limits": [value]}, "error": value})
    read_glm_usage(body, now=NOW)
    read_glm_tools(body, now=NOW)
    read_glm_error(429, body, now=NOW)
    read_glm_error(429, orjson.dumps(value), now=NOW)
    token_limit = value if isinstance(value, dict) else {"percentage": value}
    read_glm_usage(
        orjson.dumps({"data": {"limits": [{"type": "TOKENS_LIMIT", **token_limit}]}}), now=NOW
    )
