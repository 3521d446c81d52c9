"""The Gemini Code Assist adapter: its envelope both ways, its bearer, its quota poll."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from google.genai import types
from pydantic import SecretStr

from rungway.adapters.base import Connection, EventKind, envelope_of, whole_reply
from rungway.adapters.gemini.api import GeminiAdapter
from rungway.adapters.gemini.code_assist import GeminiCodeAssistAdapter
from rungway.protocol.api import Api
from rungway.protocol.auth import Auth
from rungway.protocol.sse import SseSplitter
from rungway.protocol.usage import ReportedUsage
from rungway.routing.snapshot import WindowStatus
from tests.unit.adapters.calls import call_of

BASE = "https://cloudcode-pa.googleapis.com/v1internal"
ADAPTER = GeminiCodeAssistAdapter()
NOW = 1790000000.0


class Project:
    """A project source whose id is set by the test."""

    def __init__(self, project: str | None) -> None:
        self.project = project
        self.problem: str | None = None

    def current(self) -> str | None:
        return self.project

    async def discover(self) -> str | None:
        return self.project


def _connection(project: str | None = "proj-123") -> Connection:
    return Connection(
        "plan",
        "gemini-code-assist",
        Auth.OAUTH,
        SecretStr("ya29.access"),
        BASE,
        frozenset({"gemini-2.5-pro"}),
        project=Project(project),
    )


INNER: dict[str, Any] = {
    "candidates": [
        {
            "content": {"role": "model", "parts": [{"text": "Hi"}]},
            "finishReason": "STOP",
        }
    ],
    "usageMetadata": {
        "promptTokenCount": 12,
        "candidatesTokenCount": 1,
        "thoughtsTokenCount": 8,
        "totalTokenCount": 21,
    },
    "modelVersion": "gemini-2.5-pro",
}


def test_it_speaks_the_gemini_api_to_the_engine_and_is_enveloped() -> None:
    assert ADAPTER.api is Api.GEMINI
    assert envelope_of(ADAPTER) is ADAPTER
    # The envelope hook costs the other adapters nothing but this answer.
    assert envelope_of(GeminiAdapter()) is None


@pytest.mark.parametrize(
    ("stream", "method"),
    [(False, ":generateContent"), (True, ":streamGenerateContent?alt=sse")],
)
def test_the_request_is_wrapped_in_the_envelope_with_the_project(stream: bool, method: str) -> None:
    inner = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "x_unknown": [1]}
    body = {**inner, "model": "auto/thrifty", "stream": stream}
    request = ADAPTER.build_request(
        call_of(
            _connection(),
            body,
            model="gemini-2.5-pro",
            headers={"user-agent": "GeminiCLI/0.1.0/gemini-2.5-pro (linux; x64)"},
        )
    )
    assert request.url == f"{BASE}{method}"
    sent = orjson.loads(request.body)
    assert sent["model"] == "gemini-2.5-pro"
    assert sent["project"] == "proj-123"
    assert sent["request"] == inner
    assert isinstance(sent["user_prompt_id"], str)
    assert sent["user_prompt_id"]
    assert request.headers["authorization"] == "Bearer ya29.access"
    assert "x-goog-api-key" not in request.headers
    assert request.headers["user-agent"].startswith("GeminiCLI/")


def test_count_tokens_wraps_the_contents_with_the_model() -> None:
    contents = [{"role": "user", "parts": [{"text": "hi"}]}]
    body = {"generateContentRequest": {"contents": contents}, "model": "m", "stream": False}
    request = ADAPTER.count_tokens_request(call_of(_connection(), body, model="gemini-2.5-pro"))
    assert request is not None
    assert request.url == f"{BASE}:countTokens"
    assert orjson.loads(request.body) == {
        "request": {"model": "models/gemini-2.5-pro", "contents": contents}
    }


def test_a_whole_reply_is_unwrapped_before_anything_reads_it() -> None:
    types.GenerateContentResponse.model_validate(INNER)
    body = orjson.dumps({"response": INNER, "traceId": "t-1"})
    reply = whole_reply(ADAPTER, body)
    assert reply == INNER
    assert ADAPTER.read_usage(INNER) == ReportedUsage(
        input_tokens=12, output_tokens=9, reasoning_tokens=8
    )


def test_each_stream_event_is_unwrapped_and_framed_as_the_gemini_api_frames_it() -> None:
    stream = b"".join(
        b"data: " + orjson.dumps({"response": chunk, "traceId": "t-1"}) + b"\r\n\r\n"
        for chunk in (
            {"candidates": [{"content": {"role": "model", "parts": [{"text": "H"}]}}]},
            INNER,
        )
    )
    events = [ADAPTER.unwrap_event(event) for event in SseSplitter().feed(stream)]
    for event in events:
        types.GenerateContentResponse.model_validate(orjson.loads(event.data))
        assert b"response" not in event.data
        assert event.raw == b"data: " + event.data + b"\r\n\r\n"
    watcher = ADAPTER.watch_stream(strip_usage_chunk=False)
    assert [watcher.see(event) for event in events] == [EventKind.CONTENT, EventKind.CONTENT]
    assert watcher.finished
    assert watcher.usage.output_tokens == 9


def test_an_error_event_has_no_envelope_and_passes_as_it_came() -> None:
    error = b'data: {"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}\r\n\r\n'
    (event,) = SseSplitter().feed(error)
    assert ADAPTER.unwrap_event(event) is event
    watcher = ADAPTER.watch_stream(strip_usage_chunk=False)
    assert watcher.see(event) is EventKind.ERROR


def test_the_quota_poll_posts_the_project_once_it_is_known() -> None:
    connection = _connection(project=None)
    target = ADAPTER.usage_target(connection)
    assert target is not None
    assert target.url == f"{BASE}:retrieveUserQuota"
    assert target.body is not None
    assert target.body() is None  # not polled before the project is found
    assert isinstance(connection.project, Project)
    connection.project.project = "proj-9"
    assert orjson.loads(target.body() or b"") == {"project": "proj-9"}
    assert target.headers["authorization"] == "Bearer ya29.access"
    reply = {
        "buckets": [
            {
                "remainingFraction": 0,
                "resetTime": "2026-09-22T07:00:00Z",
                "modelId": "gemini-2.5-pro",
                "tokenType": "REQUESTS",
            }
        ]
    }
    (window,) = target.read(orjson.dumps(reply), NOW).windows
    assert window.model == "gemini-2.5-pro"
    assert window.status is WindowStatus.REJECTED


def test_a_quota_exhausted_429_spends_the_requested_models_window_until_the_reset() -> None:
    body = orjson.dumps(
        {
            "error": {
                "code": 429,
                "message": "You have exhausted your capacity on this model.",
                "status": "RESOURCE_EXHAUSTED",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": "QUOTA_EXHAUSTED",
                        "domain": "cloudcode-pa.googleapis.com",
                        "metadata": {"quotaResetDelay": "1h2m3s"},
                    }
                ],
            }
        }
    )
    (window,) = ADAPTER.error_windows(
        _connection(), status=429, headers={}, body=body, model="gemini-2.5-pro", now=NOW
    )
    assert window.model == "gemini-2.5-pro"
    assert window.status is WindowStatus.REJECTED
    assert window.resets_at == pytest.approx(NOW + 3723)
