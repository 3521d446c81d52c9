"""The Kimi Code and MiniMax Token Plan usage readers, against bodies in the shapes their
endpoints were seen to send (tests/fixtures/kimi, tests/fixtures/minimax)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rungway.quota.kimi import booster_cents_left, read_kimi_usage
from rungway.quota.minimax import minimax_error_code, read_minimax_remains
from rungway.routing.snapshot import WindowStatus

FIXTURES = Path(__file__).parents[2] / "fixtures"
NOW = 1_780_500_000.0


def _fixture(vendor: str, name: str) -> bytes:
    return (FIXTURES / vendor / name).read_bytes()


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def test_kimi_usage_reads_the_5h_and_weekly_windows_from_decimal_strings() -> None:
    reading = read_kimi_usage(_fixture("kimi", "usages.json"), now=1_757_000_000.0)
    windows = {window.name: window for window in reading.windows}
    assert set(windows) == {"5h", "7d"}
    assert windows["5h"].used_percent == pytest.approx(8.0)
    assert windows["5h"].resets_at == pytest.approx(_epoch("2026-09-11T16:39:34.389610+00:00"))
    assert windows["7d"].used_percent == pytest.approx(2.0)
    assert windows["7d"].resets_at == pytest.approx(_epoch("2026-09-15T19:39:34.389610+00:00"))
    assert all(window.status is WindowStatus.ALLOWED for window in windows.values())
    # 3,500,000 millionths of a cent left, under the monthly cap: extra usage is billed.
    assert reading.overage_permitted is True


def test_kimi_booster_is_fixed_point_cents() -> None:
    wallet = orjson.loads(_fixture("kimi", "usages.json"))["boosterWallet"]
    assert booster_cents_left(wallet) == pytest.approx(3.5)


@pytest.mark.parametrize(
    "wallet",
    [
        None,
        {"balance": {"type": "BOOSTER", "amount": "2500000000", "amountLeft": "0"}},
        {"balance": {"type": "GIFT", "amount": "2500000000", "amountLeft": "10"}},
        {
            "balance": {"type": "BOOSTER", "amount": "2500000000", "amountLeft": "3500000"},
            "monthlyChargeLimitEnabled": True,
            "monthlyChargeLimit": {"priceInCents": "20000"},
            "monthlyUsed": {"priceInCents": "20000"},
        },
    ],
    ids=["no wallet", "empty", "not a booster", "monthly cap reached"],
)
def test_kimi_without_a_usable_booster_stops_at_its_quota(wallet: object) -> None:
    data = orjson.loads(_fixture("kimi", "usages.json"))
    data["boosterWallet"] = wallet
    assert read_kimi_usage(orjson.dumps(data), now=NOW).overage_permitted is False


def test_kimi_derives_a_missing_count_and_rejects_a_spent_window() -> None:
    body = {
        "usage": {"limit": "100", "remaining": "0", "resetTime": "2030-01-01T00:00:00Z"},
        "limits": [
            {"window": {"duration": 5, "timeUnit": "TIME_UNIT_HOUR"}, "detail": {"limit": "100"}}
        ],
    }
    reading = read_kimi_usage(orjson.dumps(body), now=NOW)
    assert [(w.name, w.used_percent, w.status) for w in reading.windows] == [
        ("7d", 100.0, WindowStatus.REJECTED)
    ]


def test_kimi_reads_the_ratio_shape_with_monthly_windows() -> None:
    reading = read_kimi_usage(_fixture("kimi", "usages_ratio.json"), now=NOW)
    windows = {window.name: window for window in reading.windows}
    assert set(windows) == {"5h", "7d", "month", "month_code"}
    assert windows["5h"].used_percent == pytest.approx(25.0)
    assert windows["7d"].status is WindowStatus.REJECTED
    assert windows["month"].resets_at == pytest.approx(_epoch("2026-11-01T00:00:00+00:00"))


@given(st.binary(max_size=64))
def test_kimi_reader_takes_any_bytes(body: bytes) -> None:
    reading = read_kimi_usage(body, now=NOW)
    assert all(0 <= (w.used_percent or 0) <= 100 for w in reading.windows)


_ANY = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text(max_size=8)
)
_DETAIL = st.fixed_dictionaries(
    {}, optional={"limit": _ANY, "used": _ANY, "remaining": _ANY, "resetTime": _ANY}
)


@given(
    st.fixed_dictionaries(
        {
            "usage": _DETAIL,
            "limits": st.lists(
                st.fixed_dictionaries(
                    {
                        "window": st.fixed_dictionaries(
                            {
                                "duration": _ANY,
                                "timeUnit": st.sampled_from(
                                    ["TIME_UNIT_MINUTE", "TIME_UNIT_WEEK", "x"]
                                )
                                | _ANY,
                            }
                        ),
                        "detail": _DETAIL,
                    }
                ),
                max_size=3,
            ),
            "boosterWallet": st.fixed_dictionaries(
                {
                    "balance": st.fixed_dictionaries(
                        {"type": st.just("BOOSTER") | _ANY, "amount": _ANY, "amountLeft": _ANY}
                    )
                },
                optional={"monthlyChargeLimitEnabled": _ANY, "monthlyUsed": _ANY},
            ),
        }
    )
)
def test_kimi_reader_takes_any_values_in_its_fields(body: dict[str, object]) -> None:
    reading = read_kimi_usage(orjson.dumps(body), now=NOW)
    assert all(0 <= (w.used_percent or 0) <= 100 for w in reading.windows)
    assert reading.overage_permitted in (True, False, None)


def test_minimax_percent_shape_reads_general_5h_and_weekly() -> None:
    reading = read_minimax_remains(
        _fixture("minimax", "token_plan_remains.json"), now=NOW, counts_remaining=False
    )
    windows = {window.name: window for window in reading.windows}
    assert set(windows) == {"5h", "7d"}
    assert windows["5h"].used_percent == pytest.approx(17.0)
    assert windows["5h"].resets_at == pytest.approx(NOW + 4325.211)
    assert windows["7d"].used_percent == pytest.approx(2.0)
    # The video row's spent 24-hour allowance does not gate text requests.
    assert all(window.status is WindowStatus.ALLOWED for window in windows.values())
    assert reading.overage_permitted is False


def test_minimax_counts_mean_used_on_token_plan_and_remaining_on_coding_plan() -> None:
    used = read_minimax_remains(
        _fixture("minimax", "token_plan_remains_counts.json"), now=NOW, counts_remaining=False
    )
    left = read_minimax_remains(
        _fixture("minimax", "coding_plan_remains_counts.json"), now=NOW, counts_remaining=True
    )
    # One account read from both endpoints at once: 151 of 1500 used is 1349 remaining.
    for reading in (used, left):
        windows = {window.name: window for window in reading.windows}
        assert windows["5h"].used_percent == pytest.approx(100 * 151 / 1500)
        assert windows["7d"].used_percent == pytest.approx(10.0)


def test_minimax_a_spent_window_is_rejected_and_an_unlimited_one_free() -> None:
    data = orjson.loads(_fixture("minimax", "token_plan_remains.json"))
    data["model_remains"][0]["current_interval_remaining_percent"] = 0
    data["model_remains"][0]["current_weekly_status"] = 3
    reading = read_minimax_remains(orjson.dumps(data), now=NOW, counts_remaining=False)
    windows = {window.name: window for window in reading.windows}
    assert windows["5h"].status is WindowStatus.REJECTED
    assert windows["7d"].used_percent == 0.0


def test_minimax_an_error_code_says_nothing_of_the_windows() -> None:
    body = _fixture("minimax", "no_plan_1004.json")
    assert read_minimax_remains(body, now=NOW, counts_remaining=False).windows == ()


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("usage limit exceeded, ... resets at 2026-05-15T15:00:00Z (2056)", 2056),
        ("login fail: ... header (1004)", 1004),
        ("invalid api key", None),
        ("odd (20x6)", None),
    ],
)
def test_minimax_error_code_is_the_trailing_number(message: str, code: int | None) -> None:
    assert minimax_error_code(message) == code


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats()
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=20,
)


@given(_JSON, st.booleans())
def test_minimax_reader_never_raises_on_any_json(payload: object, counts_remaining: bool) -> None:
    if not _encodable(payload):
        return
    body = orjson.dumps(payload, option=orjson.OPT_NON_STR_KEYS)
    reading = read_minimax_remains(body, now=NOW, counts_remaining=counts_remaining)
    assert all(0 <= (w.used_percent or 0) <= 100 for w in reading.windows)


@given(
    st.fixed_dictionaries(
        {
            "model_name": st.sampled_from(["general", "MiniMax-M2.5", "video"]),
            "current_interval_remaining_percent": _ANY,
            "current_interval_total_count": _ANY,
            "current_interval_usage_count": _ANY,
            "remains_time": _ANY,
            "end_time": _ANY,
        }
    )
)
def test_minimax_reader_takes_any_values_in_a_text_row(row: dict[str, object]) -> None:
    body = {"base_resp": {"status_code": 0}, "model_remains": [row]}
    if not _encodable(body):
        return
    reading = read_minimax_remains(orjson.dumps(body), now=NOW, counts_remaining=False)
    assert all(0 <= (w.used_percent or 0) <= 100 for w in reading.windows)


def _encodable(payload: object) -> bool:
    try:
        orjson.dumps(payload, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError:
        return False
    return True
