"""How the GLM Coding Plan adapter classifies Z.ai's 429 business codes, names the windows a
spent one shows, and finds the quota endpoint, from bodies in the shapes Z.ai was seen to
send (tests/fixtures/glm)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from pydantic import SecretStr

from rungway.adapters.base import Connection
from rungway.adapters.glm.adapter import GlmAnthropicAdapter, GlmCodingAdapter
from rungway.protocol.auth import Auth
from rungway.protocol.failures import FailureClass

ERRORS = json.loads(
    (Path(__file__).parents[2] / "fixtures" / "glm" / "errors.json").read_text(encoding="utf-8")
)
NOW = datetime(2026, 8, 24, 12, 0, tzinfo=UTC).timestamp()


def _body(name: str) -> bytes:
    return orjson.dumps(ERRORS[name])


def _connection(base_url: str, usage_base_url: str | None = None) -> Connection:
    return Connection(
        "glm",
        "glm-coding",
        Auth.APIKEY,
        SecretStr("sk-glm"),
        base_url,
        frozenset({"glm-5.2"}),
        usage_base_url=usage_base_url,
    )


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("1308_five_hours_cn", FailureClass.QUOTA_EXHAUSTED),
        ("1310_weekly_iso", FailureClass.QUOTA_EXHAUSTED),
        ("1317_numeric_code", FailureClass.QUOTA_EXHAUSTED),
        ("1302_concurrency", FailureClass.RATE_LIMITED),
        ("1305_overloaded", FailureClass.OVERLOADED),
        ("1309_expired", FailureClass.BILLING),
    ],
)
def test_a_429_is_classified_by_its_business_code(name: str, kind: FailureClass) -> None:
    assert GlmCodingAdapter().classify_failure(429, {}, _body(name)).kind is kind
    assert GlmAnthropicAdapter().classify_failure(429, {}, _body(name)).kind is kind


def test_a_bad_key_is_auth_and_a_plain_429_a_rate_limit() -> None:
    adapter = GlmCodingAdapter()
    unauthorised = orjson.dumps({"error": {"code": "1000", "message": "身份验证失败。"}})
    assert adapter.classify_failure(401, {}, unauthorised).kind is FailureClass.AUTH
    assert adapter.classify_failure(429, {}, b"Too Many Requests").kind is FailureClass.RATE_LIMITED


def test_a_spent_window_names_its_reset_and_a_throttle_names_none() -> None:
    adapter = GlmCodingAdapter()
    connection = _connection("https://api.z.ai/api/coding/paas/v4")

    def windows(name: str) -> list[tuple[str, float | None]]:
        found = adapter.error_windows(
            connection, status=429, headers={}, body=_body(name), model="glm-5.2", now=NOW
        )
        return [(window.name, window.resets_at) for window in found]

    reset = datetime(2026, 8, 24, 23, 41, 44, tzinfo=UTC).timestamp()
    assert windows("1308_five_hours_cn") == [("5h", reset)]
    assert windows("1302_concurrency") == []


def test_the_quota_endpoint_is_on_the_api_host_unless_moved() -> None:
    adapter = GlmCodingAdapter()
    target = adapter.usage_target(_connection("https://open.bigmodel.cn/api/coding/paas/v4"))
    assert target is not None
    assert target.url == "https://open.bigmodel.cn/api/monitor/usage/quota/limit"
    assert dict(target.headers)["authorization"] == "Bearer sk-glm"
    moved = adapter.usage_target(
        _connection("https://api.z.ai/api/coding/paas/v4", "http://127.0.0.1:9/")
    )
    assert moved is not None
    assert moved.url == "http://127.0.0.1:9/api/monitor/usage/quota/limit"


def test_the_anthropic_endpoint_polls_the_same_quota_endpoint_and_reads_no_headers() -> None:
    adapter = GlmAnthropicAdapter()
    connection = _connection("https://api.z.ai/api/anthropic")
    target = adapter.usage_target(connection)
    assert target is not None
    assert target.url == "https://api.z.ai/api/monitor/usage/quota/limit"
    # A plan key is no Claude login: no unified headers to read, no extra usage.
    headers = {"anthropic-ratelimit-unified-5h-utilization": "0.99"}
    assert adapter.read_quota(connection, model="glm-5.2", headers=headers, now=NOW) == ()
