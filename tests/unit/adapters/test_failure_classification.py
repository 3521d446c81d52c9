"""Every recorded upstream error body is classified into the right failure class."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from multidict import CIMultiDict

from rungway.adapters.anthropic.messages import AnthropicMessagesAdapter
from rungway.adapters.base import Adapter
from rungway.adapters.openai.chat import OpenAIChatAdapter
from rungway.protocol.failures import FailureClass

FIXTURES = Path(__file__).parents[2] / "fixtures"


def _cases(vendor: str) -> list[Any]:
    cases = json.loads((FIXTURES / vendor / "failures.json").read_text())
    return [pytest.param(case, id=case["name"]) for case in cases]


def _classify(adapter: Adapter, case: dict[str, Any]) -> None:
    body = case["raw_body"].encode() if "raw_body" in case else json.dumps(case["body"]).encode()
    failure = adapter.classify_failure(case["status"], CIMultiDict(case["headers"]), body)
    assert failure.kind is FailureClass(case["class"])
    assert failure.status == case["status"]
    assert failure.body == body
    if "retry_after_s" in case:
        assert failure.retry_after_s == pytest.approx(case["retry_after_s"])


@pytest.mark.parametrize("case", _cases("openai"))
def test_openai_compatible_failures(case: dict[str, Any]) -> None:
    _classify(OpenAIChatAdapter(), case)


@pytest.mark.parametrize("case", _cases("anthropic"))
def test_anthropic_failures(case: dict[str, Any]) -> None:
    _classify(AnthropicMessagesAdapter(), case)


def test_anthropic_quota_headers_are_read_whatever_their_case() -> None:
    headers = CIMultiDict({"Anthropic-Ratelimit-Unified-Status": "rejected"})
    failure = AnthropicMessagesAdapter().classify_failure(429, headers, b"{}")
    assert failure.kind is FailureClass.QUOTA_EXHAUSTED


def test_only_bad_request_goes_back_to_the_client() -> None:
    adapter = OpenAIChatAdapter()
    bad = adapter.classify_failure(400, {}, b'{"error":{"message":"bad","code":"invalid_type"}}')
    busy = adapter.classify_failure(503, {}, b"{}")
    assert bad.returns_to_client
    assert not busy.returns_to_client
