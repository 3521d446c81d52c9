"""Antigravity's quota reader over any JSON: it never raises, every window is a model's
bucket of 0..100 % used, and a bucket is spent exactly when its fraction is 0 or absent."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from rungway.quota.antigravity import WINDOW, read_antigravity_quota
from rungway.routing.snapshot import WindowStatus

NOW = 1_800_000_000.0
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.floats(allow_nan=False)
    | st.integers(-(2**63), 2**63 - 1)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
FRACTION = st.none() | st.floats(min_value=-1, max_value=2, allow_nan=False)
BUCKET = st.fixed_dictionaries(
    {"modelId": st.sampled_from(["gemini-3-flash", "claude-sonnet-4-6", "gpt-oss-120b"])},
    optional={
        "remainingFraction": FRACTION,
        "resetTime": st.sampled_from(["2030-01-01T00:00:00Z", "", "soon"]),
    },
)


@given(JSON, JSON)
def test_any_json_reads_without_raising(body: Any, fallback: Any) -> None:
    reading = read_antigravity_quota(orjson.dumps(body), now=NOW, fallback=orjson.dumps(fallback))
    for window in reading.windows:
        assert window.name == WINDOW
        assert window.model
        assert window.used_percent is not None
        assert 0.0 <= window.used_percent <= 100.0


@given(st.lists(BUCKET, max_size=6))
def test_a_bucket_is_spent_exactly_when_nothing_is_left(buckets: list[dict[str, Any]]) -> None:
    reading = read_antigravity_quota(orjson.dumps({"buckets": buckets}), now=NOW)
    by_model = {window.model: window for window in reading.windows}
    for bucket in buckets:
        window = by_model.get(bucket["modelId"])
        fraction = bucket.get("remainingFraction")
        if fraction is None or fraction <= 0:
            # An absent or spent fraction is never read as unlimited.
            assert window is not None
            assert window.status is WindowStatus.REJECTED
        elif window is not None and window.status is WindowStatus.ALLOWED:
            assert window.used_percent is not None
            assert window.used_percent < 100.0
