"""The Antigravity adapter: its envelope fields, the client's user agent passed on, AI
credits asked for only when the login spends them, and its quota poll."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from pydantic import SecretStr

from rungway.adapters.antigravity.adapter import USER_AGENT, AntigravityAdapter
from rungway.adapters.base import Connection
from rungway.protocol.auth import Auth
from rungway.protocol.failures import FailureClass
from tests.unit.adapters.calls import call_of

BASE = "https://cloudcode-pa.googleapis.com/v1internal"
ADAPTER = AntigravityAdapter()
NOW = 1790000000.0


class Project:
    """A project source with credits, both set by the test."""

    def __init__(self, credits: bool | None) -> None:
        self.credits = credits
        self.problem: str | None = None

    def current(self) -> str | None:
        return "proj-ag"

    async def discover(self) -> str | None:
        return "proj-ag"

    def credits_in_use(self) -> bool | None:
        return self.credits


def _connection(credits: bool | None = False) -> Connection:
    return Connection(
        "ag",
        "antigravity",
        Auth.OAUTH,
        SecretStr("ya29.access"),
        BASE,
        frozenset({"gemini-3-flash"}),
        project=Project(credits),
    )


BODY: dict[str, Any] = {
    "contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
    "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
    "generationConfig": {"maxOutputTokens": 64},
}


def test_the_envelope_carries_antigravitys_fields_and_drops_safety_settings() -> None:
    agent = "antigravity/cli/1.2.2 (aidev_client; os_type=darwin; arch=arm64)"
    request = ADAPTER.build_request(
        call_of(_connection(), BODY, model="gemini-3-flash", headers={"user-agent": agent})
    )
    assert request.url == f"{BASE}:generateContent"
    envelope = orjson.loads(request.body)
    assert envelope["project"] == "proj-ag"
    assert envelope["model"] == "gemini-3-flash"
    assert (envelope["userAgent"], envelope["requestType"]) == ("antigravity", "agent")
    assert envelope["requestId"].startswith("agent-")
    assert "enabledCreditTypes" not in envelope
    assert "safetySettings" not in envelope["request"]
    assert envelope["request"]["generationConfig"] == {"maxOutputTokens": 64}
    assert request.headers["user-agent"] == agent
    assert request.headers["authorization"] == "Bearer ya29.access"


def test_a_stream_goes_to_the_sse_method() -> None:
    request = ADAPTER.build_request(call_of(_connection(), {**BODY, "stream": True}))
    assert request.url == f"{BASE}:streamGenerateContent?alt=sse"


@pytest.mark.parametrize(("credits", "asked"), [(True, True), (False, False), (None, False)])
def test_credits_are_asked_for_only_when_the_login_spends_them(
    credits: bool | None, asked: bool
) -> None:
    envelope = orjson.loads(ADAPTER.build_request(call_of(_connection(credits), BODY)).body)
    assert ("enabledCreditTypes" in envelope) is asked
    if asked:
        assert envelope["enabledCreditTypes"] == ["GOOGLE_ONE_AI"]


def test_the_quota_poll_reads_buckets_and_says_whether_credits_pay_past_them() -> None:
    target = ADAPTER.usage_target(_connection(credits=True))
    assert target is not None
    assert target.url == f"{BASE}:retrieveUserQuota"
    assert target.body is not None
    assert orjson.loads(target.body() or b"") == {"project": "proj-ag"}
    assert target.headers["user-agent"] == USER_AGENT
    body = orjson.dumps(
        {"buckets": [{"modelId": "gemini-3-flash", "resetTime": "2030-01-01T00:00:00Z"}]}
    )
    reading = target.read(body, NOW)
    assert reading.overage_permitted is True
    (window,) = reading.windows
    assert (window.model, window.used_percent) == ("gemini-3-flash", 100.0)


def test_a_refused_client_is_a_terms_failure_and_a_spent_bucket_is_quota() -> None:
    refused = orjson.dumps(
        {
            "error": {
                "code": 403,
                "message": "This Antigravity sign-in may be used only from Google's clients.",
                "status": "PERMISSION_DENIED",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": "UNSUPPORTED_CLIENT",
                        "domain": "cloudcode-pa.googleapis.com",
                    }
                ],
            }
        }
    )
    assert ADAPTER.classify_failure(403, {}, refused).kind is FailureClass.TERMS
    denied = orjson.dumps({"error": {"code": 403, "status": "PERMISSION_DENIED"}})
    assert ADAPTER.classify_failure(403, {}, denied).kind is not FailureClass.TERMS
