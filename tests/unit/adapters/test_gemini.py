"""The Gemini API adapter on recorded bodies: requests, usage, streams, failures, windows.

Every reply body here is checked against the official `google-genai` types first, so the
adapter is tested on shapes Google's own SDK accepts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from google.genai import types
from pydantic import SecretStr

from rungway.adapters.base import Connection, EventKind
from rungway.adapters.gemini.api import GeminiAdapter
from rungway.protocol.api import Api
from rungway.protocol.auth import Auth
from rungway.protocol.failures import FailureClass
from rungway.protocol.sse import SseSplitter
from rungway.protocol.usage import ReportedUsage
from rungway.routing.snapshot import WindowStatus
from tests.unit.adapters.calls import call_of

FIXTURES = Path(__file__).parents[2] / "fixtures" / "gemini"
KEY = Connection(
    "free",
    "gemini",
    Auth.APIKEY,
    SecretStr("AIza-test-key"),
    "https://generativelanguage.googleapis.com/v1beta",
    frozenset({"gemini-2.5-flash"}),
)
ADAPTER = GeminiAdapter()
NOW = 1790000000.0

REQUEST: dict[str, Any] = {
    "contents": [{"role": "user", "parts": [{"text": "Say hi"}]}],
    "systemInstruction": {"parts": [{"text": "Be brief."}]},
    "generationConfig": {"maxOutputTokens": 64, "thinkingConfig": {"thinkingBudget": 128}},
    "x_unknown_field": {"kept": 1.5},
}
REPLY: dict[str, Any] = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [{"text": "Thinking it over", "thought": True}, {"text": "Hi!"}],
            },
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": {
        "promptTokenCount": 120,
        "cachedContentTokenCount": 100,
        "candidatesTokenCount": 3,
        "thoughtsTokenCount": 40,
        "totalTokenCount": 163,
    },
    "modelVersion": "gemini-2.5-flash",
    "responseId": "abc123",
}
# As Google sends it: `\r\n\r\n` frame ends and no terminator; the last chunk carries the
# finish reason and the final usage.
STREAM = b"".join(
    b"data: " + orjson.dumps(chunk) + b"\r\n\r\n"
    for chunk in (
        {
            "candidates": [{"content": {"parts": [{"text": ""}], "role": "model"}, "index": 0}],
            "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9},
            "modelVersion": "gemini-2.5-flash",
        },
        {
            "candidates": [{"content": {"parts": [{"text": "Hel"}], "role": "model"}, "index": 0}],
            "usageMetadata": {
                "promptTokenCount": 9,
                "candidatesTokenCount": 1,
                "totalTokenCount": 10,
            },
            "modelVersion": "gemini-2.5-flash",
        },
        {
            "candidates": [
                {
                    "content": {"parts": [{"text": "lo"}], "role": "model"},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 9,
                "candidatesTokenCount": 2,
                "thoughtsTokenCount": 5,
                "totalTokenCount": 16,
            },
            "modelVersion": "gemini-2.5-flash",
        },
    )
)


def _events(stream: bytes) -> list[Any]:
    return SseSplitter().feed(stream)


def test_recorded_bodies_are_what_the_official_sdk_reads() -> None:
    types.GenerateContentResponse.model_validate(REPLY)
    for event in _events(STREAM):
        types.GenerateContentResponse.model_validate(orjson.loads(event.data))
    types.GenerateContentConfig.model_validate(
        {"max_output_tokens": 64, "thinking_config": {"thinking_budget": 128}}
    )


def test_the_adapter_speaks_gemini() -> None:
    assert ADAPTER.api is Api.GEMINI


@pytest.mark.parametrize(
    ("stream", "url"),
    [
        (False, "/models/gemini-2.5-flash:generateContent"),
        (True, "/models/gemini-2.5-flash:streamGenerateContent?alt=sse"),
    ],
)
def test_the_model_and_method_go_in_the_url_and_the_gateway_keys_leave_the_body(
    stream: bool, url: str
) -> None:
    body = {**REQUEST, "model": "free/gemini-2.5-flash", "stream": stream}
    request = ADAPTER.build_request(
        call_of(
            KEY,
            body,
            model="gemini-2.5-flash",
            headers={"user-agent": "GeminiCLI/1.0", "x-goog-api-key": "client-key"},
        )
    )
    assert request.url == f"{KEY.base_url}{url}"
    assert orjson.loads(request.body) == REQUEST  # unknown fields kept, values unchanged
    assert request.headers["x-goog-api-key"] == "AIza-test-key"  # never the client's key
    assert request.headers["user-agent"] == "GeminiCLI/1.0"
    assert "authorization" not in request.headers


def test_count_tokens_posts_to_the_models_count_method() -> None:
    body = {"contents": REQUEST["contents"], "model": "gemini-2.5-flash", "stream": False}
    request = ADAPTER.count_tokens_request(call_of(KEY, body, model="gemini-2.5-flash"))
    assert request is not None
    assert request.url == f"{KEY.base_url}/models/gemini-2.5-flash:countTokens"
    assert orjson.loads(request.body) == {"contents": REQUEST["contents"]}


@pytest.mark.parametrize("key", ["generateContentRequest", "generate_content_request"])
def test_a_count_of_a_whole_request_names_the_upstreams_model(key: str) -> None:
    inner = {"model": "models/my-alias", "contents": REQUEST["contents"]}
    body = {key: inner, "model": "my-alias", "stream": False}
    request = ADAPTER.count_tokens_request(call_of(KEY, body, model="gemini-2.5-flash"))
    assert request is not None
    assert request.url == f"{KEY.base_url}/models/gemini-2.5-flash:countTokens"
    sent = orjson.loads(request.body)
    assert sent == {key: {"model": "models/gemini-2.5-flash", "contents": REQUEST["contents"]}}
    assert inner["model"] == "models/my-alias"  # the client's body is left as it was


def test_usage_counts_cached_tokens_apart_and_thoughts_as_output() -> None:
    usage = ADAPTER.read_usage(REPLY)
    # promptTokenCount includes the cached tokens; thoughts are not in candidatesTokenCount.
    assert usage == ReportedUsage(
        input_tokens=20, output_tokens=43, cache_read_tokens=100, reasoning_tokens=40
    )


def test_a_reply_without_usage_reads_as_nothing_used() -> None:
    assert ADAPTER.read_usage({"candidates": []}) == ReportedUsage()


def test_a_stream_holds_its_empty_opening_and_finishes_on_the_finish_reason() -> None:
    watcher = ADAPTER.watch_stream(strip_usage_chunk=False)
    kinds = [watcher.see(event) for event in _events(STREAM)]
    assert kinds == [EventKind.PREAMBLE, EventKind.CONTENT, EventKind.CONTENT]
    assert watcher.finished
    assert watcher.failure is None
    assert watcher.usage == ReportedUsage(input_tokens=9, output_tokens=7, reasoning_tokens=5)


def test_a_stream_without_a_finish_reason_is_not_finished() -> None:
    watcher = ADAPTER.watch_stream(strip_usage_chunk=False)
    for event in _events(STREAM)[:2]:
        watcher.see(event)
    assert not watcher.finished


def test_a_blocked_prompt_ends_the_stream_with_no_candidates() -> None:
    chunk = {
        "promptFeedback": {"blockReason": "SAFETY"},
        "usageMetadata": {"promptTokenCount": 7, "totalTokenCount": 7},
    }
    types.GenerateContentResponse.model_validate(chunk)
    watcher = ADAPTER.watch_stream(strip_usage_chunk=False)
    (event,) = _events(b"data: " + orjson.dumps(chunk) + b"\r\n\r\n")
    assert watcher.see(event) is EventKind.CONTENT
    assert watcher.finished


def test_a_function_call_is_content() -> None:
    chunk = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]}}
        ]
    }
    types.GenerateContentResponse.model_validate(chunk)
    watcher = ADAPTER.watch_stream(strip_usage_chunk=False)
    (event,) = _events(b"data: " + orjson.dumps(chunk) + b"\r\n\r\n")
    assert watcher.see(event) is EventKind.CONTENT


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (
            {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"},
            FailureClass.OVERLOADED,
        ),
        ({"code": 500, "message": "Internal error.", "status": "INTERNAL"}, FailureClass.SERVER),
        (
            {"code": 429, "message": "Resource exhausted.", "status": "RESOURCE_EXHAUSTED"},
            FailureClass.RATE_LIMITED,
        ),
    ],
)
def test_an_error_event_in_a_stream_is_an_error(error: dict[str, Any], kind: FailureClass) -> None:
    watcher = ADAPTER.watch_stream(strip_usage_chunk=False)
    (event,) = _events(b"data: " + orjson.dumps({"error": error}) + b"\r\n\r\n")
    assert watcher.see(event) is EventKind.ERROR
    assert watcher.failure is not None
    assert watcher.failure.kind is kind


def _google_error(status: int, grpc: str, message: str, *details: dict[str, Any]) -> bytes:
    error: dict[str, Any] = {"code": status, "message": message, "status": grpc}
    if details:
        error["details"] = list(details)
    return orjson.dumps({"error": error})


INVALID_KEY = _google_error(
    400,
    "INVALID_ARGUMENT",
    "API key not valid. Please pass a valid API key.",
    {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "API_KEY_INVALID",
        "domain": "googleapis.com",
        "metadata": {"service": "generativelanguage.googleapis.com"},
    },
)


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (
            400,
            _google_error(400, "INVALID_ARGUMENT", "Invalid JSON payload received."),
            FailureClass.BAD_REQUEST,
        ),
        (400, INVALID_KEY, FailureClass.AUTH),
        (
            400,
            _google_error(
                400,
                "INVALID_ARGUMENT",
                "The input token count (1048577) exceeds "
                "the maximum number of tokens allowed (1048576).",
            ),
            FailureClass.CONTEXT_TOO_LONG,
        ),
        (
            400,
            _google_error(
                400, "FAILED_PRECONDITION", "User location is not supported for the API use."
            ),
            FailureClass.MODEL_UNAVAILABLE,
        ),
        (
            403,
            _google_error(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers."),
            FailureClass.AUTH,
        ),
        (
            404,
            _google_error(404, "NOT_FOUND", "models/gemini-9 is not found for API version v1beta."),
            FailureClass.MODEL_UNAVAILABLE,
        ),
        (
            500,
            _google_error(500, "INTERNAL", "An internal error has occurred."),
            FailureClass.SERVER,
        ),
        (
            503,
            _google_error(503, "UNAVAILABLE", "The model is overloaded."),
            FailureClass.OVERLOADED,
        ),
        (504, _google_error(504, "DEADLINE_EXCEEDED", "Deadline expired."), FailureClass.TIMEOUT),
    ],
)
def test_failures_are_classified(status: int, body: bytes, kind: FailureClass) -> None:
    failure = ADAPTER.classify_failure(status, {}, body)
    assert failure.kind is kind
    assert failure.status == status
    assert failure.body == body


def _recorded_429s() -> list[dict[str, Any]]:
    cases = json.loads((FIXTURES / "errors.json").read_text())
    return [c for c in cases if c["reader"] == "gemini_error" and c["status"] == 429]


@pytest.mark.parametrize("case", _recorded_429s(), ids=lambda case: case["name"])
def test_a_recorded_429_is_exhaustion_when_terminal_else_a_rate_limit(case: dict[str, Any]) -> None:
    body = orjson.dumps(case["body"])
    failure = ADAPTER.classify_failure(case["status"], {}, body)
    if "INSUFFICIENT_G1_CREDITS_BALANCE" in body.decode():
        assert failure.kind is FailureClass.BILLING
    elif case["terminal"]:
        assert failure.kind is FailureClass.QUOTA_EXHAUSTED
    else:
        assert failure.kind is FailureClass.RATE_LIMITED
    if case["retry_after_s"] is not None and failure.kind is not FailureClass.BILLING:
        assert failure.retry_after_s == pytest.approx(case["retry_after_s"])


@pytest.mark.parametrize("case", _recorded_429s(), ids=lambda case: case["name"])
def test_a_recorded_429s_daily_windows_are_the_models(case: dict[str, Any]) -> None:
    windows = ADAPTER.error_windows(
        KEY,
        status=429,
        headers={},
        body=orjson.dumps(case["body"]),
        model="asked-model",
        now=case["now"],
    )
    expected = {(w["name"], w["model"] or "asked-model", w["resets_at"]) for w in case["windows"]}
    daily = {(w.name, w.model, w.resets_at) for w in windows if w.name != "1m"}
    assert daily == expected
    assert all(w.status is WindowStatus.REJECTED and w.model is not None for w in windows)


def test_a_free_tier_per_minute_429_spends_the_models_minute_until_the_retry_delay() -> None:
    case = next(c for c in _recorded_429s() if "per-minute quota with RetryInfo" in c["name"])
    windows = ADAPTER.error_windows(
        KEY,
        status=429,
        headers={},
        body=orjson.dumps(case["body"]),
        model="gemini-2.5-pro",
        now=NOW,
    )
    (window,) = windows
    assert window.name == "1m"
    assert window.model == "gemini-2.5-pro"
    assert window.status is WindowStatus.REJECTED
    assert window.resets_at == pytest.approx(NOW + 34.074824224)


def test_no_quota_headers_exist() -> None:
    assert ADAPTER.read_quota(KEY, model="m", headers={"x-ratelimit-limit": "5"}, now=NOW) == ()


def test_a_bare_429_spends_no_window() -> None:
    body = _google_error(
        429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."
    )
    assert ADAPTER.error_windows(KEY, status=429, headers={}, body=body, model="m", now=NOW) == ()
    assert ADAPTER.classify_failure(429, {}, body).kind is FailureClass.RATE_LIMITED


def test_an_empty_text_with_only_a_thought_signature_is_held_back() -> None:
    chunk = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "", "thoughtSignature": "c2ln"}]}}
        ]
    }
    types.GenerateContentResponse.model_validate(chunk)
    watcher = ADAPTER.watch_stream(strip_usage_chunk=False)
    (event,) = _events(b"data: " + orjson.dumps(chunk) + b"\r\n\r\n")
    assert watcher.see(event) is EventKind.PREAMBLE
