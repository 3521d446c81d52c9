"""Provider adapters on top of Chat Completions: Copilot's identity, OpenRouter's credits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from multidict import CIMultiDict
from pydantic import SecretStr

from rungway.adapters.base import Connection, ErrorQuota, HasUsageEndpoint
from rungway.adapters.copilot.adapter import CopilotAdapter
from rungway.adapters.openrouter.adapter import OpenRouterAdapter
from rungway.adapters.registry import provider_entry
from rungway.protocol.auth import Auth
from rungway.protocol.failures import FailureClass
from tests.unit.adapters.calls import call_of

FIXTURES = Path(__file__).parents[2] / "fixtures"
SEAT = Connection(
    "seat", "copilot", Auth.OAUTH, SecretStr("gho_seat"), "http://copilot", frozenset({"m"})
)
ROUTER = Connection(
    "router", "openrouter", Auth.APIKEY, SecretStr("sk-or-x"), "http://or/api/v1", frozenset()
)


def _copilot_request(messages: list[dict[str, Any]], **headers: str) -> dict[str, str]:
    body = {"model": "m", "messages": messages}
    request = CopilotAdapter().build_request(call_of(SEAT, body, headers=headers))
    assert request.url == "http://copilot/chat/completions"
    return request.headers


def test_copilot_requests_carry_the_editor_identity() -> None:
    headers = _copilot_request([{"role": "user", "content": "hi"}])
    assert headers["authorization"] == "Bearer gho_seat"
    assert headers["copilot-integration-id"] == "vscode-chat"
    assert headers["x-github-api-version"] == "2025-04-01"
    assert headers["openai-intent"] == "conversation-panel"
    assert headers["user-agent"].startswith("GitHubCopilotChat/")
    assert headers["x-initiator"] == "user"
    assert "copilot-vision-request" not in headers


def test_copilot_agent_turns_and_images_are_marked() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    headers = _copilot_request(
        [
            {"role": "user", "content": [image]},
            {"role": "assistant", "content": "", "tool_calls": []},
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
        ],
        **{"user-agent": "my-editor/1.0"},
    )
    assert headers["x-initiator"] == "agent"
    assert headers["copilot-vision-request"] == "true"
    assert headers["user-agent"] == "my-editor/1.0", "the client's own identity is kept"


def test_copilot_usage_endpoint_is_on_the_github_api_unless_configured() -> None:
    adapter = CopilotAdapter()
    target = adapter.usage_target(SEAT)
    assert target is not None
    assert target.url == "https://api.github.com/copilot_internal/user"
    assert target.headers["authorization"] == "token gho_seat"
    moved = Connection(**{**_fields(SEAT), "usage_base_url": "http://sim"})
    moved_target = adapter.usage_target(moved)
    assert moved_target is not None
    assert moved_target.url == "http://sim/copilot_internal/user"


def test_openrouter_key_endpoint_sits_beside_the_api() -> None:
    target = OpenRouterAdapter().usage_target(ROUTER)
    assert target is not None
    assert (target.url, target.headers["authorization"]) == (
        "http://or/api/v1/key",
        "Bearer sk-or-x",
    )


def _openrouter_cases() -> list[Any]:
    cases = json.loads((FIXTURES / "openrouter" / "errors.json").read_text())
    return [pytest.param(case, id=case["name"]) for case in cases]


@pytest.mark.parametrize("case", _openrouter_cases())
def test_openrouter_errors_classify_and_name_their_windows(case: dict[str, Any]) -> None:
    adapter = OpenRouterAdapter()
    headers = CIMultiDict(case["headers"])
    body = json.dumps(case["body"]).encode()
    failure = adapter.classify_failure(case["status"], headers, body)
    if case["status"] == 402:
        expected = FailureClass.BILLING if case["terminal"] else FailureClass.RATE_LIMITED
        assert failure.kind is expected
    windows = adapter.error_windows(
        ROUTER, status=case["status"], headers=headers, body=body, model="m", now=case["now"]
    )
    assert [(w.name, w.status.value, w.resets_at) for w in windows] == [
        (w["name"], w["status"], w["resets_at"]) for w in case["windows"]
    ]
    if case["retry_after_s"] is not None and case["status"] == 402:
        assert failure.retry_after_s == case["retry_after_s"]


def test_the_registry_gives_copilot_and_openrouter_their_own_adapters() -> None:
    copilot = provider_entry("copilot")
    assert isinstance(copilot.adapter, CopilotAdapter)
    assert copilot.default_base_url == "https://api.githubcopilot.com"
    assert isinstance(provider_entry("openrouter").adapter, HasUsageEndpoint)
    assert isinstance(provider_entry("openrouter").adapter, ErrorQuota)
    assert not isinstance(provider_entry("deepseek").adapter, ErrorQuota)


def _fields(connection: Connection) -> dict[str, Any]:
    return {name: getattr(connection, name) for name in Connection.__slots__}


def test_copilot_spent_allowance_is_quota_not_billing() -> None:
    adapter = CopilotAdapter()
    spent = adapter.classify_failure(
        402, {}, b'{"error":{"message":"You have no quota","code":"quota_exceeded"}}'
    )
    assert spent.kind is FailureClass.QUOTA_EXHAUSTED
    other = adapter.classify_failure(402, {}, b'{"error":{"message":"payment required"}}')
    assert other.kind is FailureClass.BILLING
