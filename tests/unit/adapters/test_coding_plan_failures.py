"""How the Kimi Code and MiniMax Token Plan adapters classify their upstreams' refusals, from
bodies in the shapes those services were seen to send."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import SecretStr

from rungway.adapters.base import Connection
from rungway.adapters.kimi_code.adapter import KimiCodeAdapter, KimiCodeChatAdapter
from rungway.adapters.minimax.adapter import MiniMaxAdapter
from rungway.protocol.auth import Auth
from rungway.protocol.failures import FailureClass
from rungway.routing.snapshot import WindowStatus

FIXTURES = Path(__file__).parents[2] / "fixtures"
NOW = 1_778_850_000.0


def _body(vendor: str, name: str) -> bytes:
    return (FIXTURES / vendor / name).read_bytes()


def _connection(provider: str, base_url: str) -> Connection:
    return Connection(
        "plan", provider, Auth.APIKEY, SecretStr("sk-sim"), base_url, frozenset({"m"})
    )


@pytest.mark.parametrize(
    ("status", "fixture", "kind"),
    [
        (403, "weekly_limit_403.json", FailureClass.QUOTA_EXHAUSTED),
        (403, "billing_cycle_403.json", FailureClass.QUOTA_EXHAUSTED),
        (403, "wrong_client_403.json", FailureClass.TERMS),
        (401, "invalid_key_401.json", FailureClass.AUTH),
        (429, "overloaded_429.json", FailureClass.RATE_LIMITED),
    ],
)
def test_kimi_tells_a_spent_plan_from_a_refused_client_by_message(
    status: int, fixture: str, kind: FailureClass
) -> None:
    failure = KimiCodeAdapter().classify_failure(status, {}, _body("kimi", fixture))
    assert failure.kind is kind


def test_kimi_spent_weekly_limit_rejects_the_weekly_window() -> None:
    adapter = KimiCodeAdapter()
    connection = _connection("kimi-code", "https://api.kimi.com/coding")
    windows = adapter.error_windows(
        connection,
        status=403,
        headers={},
        body=_body("kimi", "weekly_limit_403.json"),
        model="kimi-for-coding",
        now=NOW,
    )
    assert [(w.name, w.status) for w in windows] == [("7d", WindowStatus.REJECTED)]
    refused = adapter.error_windows(
        connection,
        status=403,
        headers={},
        body=_body("kimi", "wrong_client_403.json"),
        model="kimi-for-coding",
        now=NOW,
    )
    assert refused == ()


def test_kimi_polls_usages_under_its_base_url() -> None:
    target = KimiCodeAdapter().usage_target(_connection("kimi-code", "https://api.kimi.com/coding"))
    assert target is not None
    assert target.url == "https://api.kimi.com/coding/v1/usages"
    assert dict(target.headers)["authorization"] == "Bearer sk-sim"


@pytest.mark.parametrize(
    ("status", "fixture", "kind"),
    [
        (429, "window_spent_429.json", FailureClass.QUOTA_EXHAUSTED),
        (401, "invalid_key_401.json", FailureClass.AUTH),
        (401, "login_fail_401.json", FailureClass.AUTH),
    ],
)
def test_minimax_classifies_by_its_code(status: int, fixture: str, kind: FailureClass) -> None:
    assert MiniMaxAdapter().classify_failure(status, {}, _body("minimax", fixture)).kind is kind


def test_minimax_a_429_without_its_plan_code_is_a_rate_limit() -> None:
    body = b'{"type":"error","error":{"type":"rate_limit_error","message":"rate limit (1002)"}}'
    assert MiniMaxAdapter().classify_failure(429, {}, body).kind is FailureClass.RATE_LIMITED


def test_minimax_spent_window_carries_the_reset_its_message_names() -> None:
    connection = _connection("minimax-token-plan", "https://api.minimax.io/anthropic")
    windows = MiniMaxAdapter().error_windows(
        connection,
        status=429,
        headers={},
        body=_body("minimax", "window_spent_429.json"),
        model="MiniMax-M3",
        now=NOW,
    )
    assert len(windows) == 1
    assert windows[0].name == "5h"
    assert windows[0].status is WindowStatus.REJECTED
    assert windows[0].resets_at == pytest.approx(1_778_857_200.0)  # 2026-05-15T15:00:00Z


def test_minimax_polls_token_plan_remains_at_the_host_root() -> None:
    connection = _connection("minimax-token-plan", "https://api.minimax.io/anthropic")
    target = MiniMaxAdapter().usage_target(connection)
    assert target is not None
    assert target.url == "https://api.minimax.io/v1/token_plan/remains"


@pytest.mark.parametrize(
    ("usage_base_url", "url", "counts_remaining"),
    [
        ("https://www.minimaxi.com", "https://www.minimaxi.com/v1/token_plan/remains", False),
        (
            "https://api.minimax.io/v1/api/openplatform/coding_plan/remains",
            "https://api.minimax.io/v1/api/openplatform/coding_plan/remains",
            True,
        ),
    ],
)
def test_minimax_usage_base_url_is_a_host_or_a_whole_remains_url(
    usage_base_url: str, url: str, counts_remaining: bool
) -> None:
    connection = replace(
        _connection("minimax-token-plan", "https://api.minimax.io/anthropic"),
        usage_base_url=usage_base_url,
    )
    target = MiniMaxAdapter().usage_target(connection)
    assert target is not None
    assert target.url == url
    # The same body read from each endpoint: 1349 is what is left on coding_plan only.
    body = (FIXTURES / "minimax" / "coding_plan_remains_counts.json").read_bytes()
    (five, _) = target.read(body, NOW).windows
    assert five.used_percent == pytest.approx(100 * (151 if counts_remaining else 1349) / 1500)


def test_kimi_chat_endpoint_classifies_as_the_messages_one_and_polls_the_same_usages() -> None:
    adapter = KimiCodeChatAdapter()
    for fixture, kind in (
        ("weekly_limit_403.json", FailureClass.QUOTA_EXHAUSTED),
        ("wrong_client_403.json", FailureClass.TERMS),
    ):
        assert adapter.classify_failure(403, {}, _body("kimi", fixture)).kind is kind
    target = adapter.usage_target(_connection("kimi-code-openai", "https://api.kimi.com/coding/v1"))
    assert target is not None
    assert target.url == "https://api.kimi.com/coding/v1/usages"
