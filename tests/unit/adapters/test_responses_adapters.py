"""Responses upstreams: API keys and the ChatGPT plan's Codex backend."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from multidict import CIMultiDict
from pydantic import SecretStr

from rungway.adapters.base import (
    Connection,
    ErrorQuota,
    EventKind,
    HasUsageEndpoint,
    UpstreamRequest,
)
from rungway.adapters.codex.adapter import CodexAdapter, chatgpt_account_id, codex_body
from rungway.adapters.openai.responses import (
    OpenAIResponsesAdapter,
    OpenAIResponsesWatcher,
    assemble_response,
)
from rungway.adapters.registry import provider_entry
from rungway.config import PROVIDERS
from rungway.protocol.api import Api
from rungway.protocol.auth import Auth
from rungway.protocol.failures import Failure, FailureClass
from rungway.protocol.sse import SseSplitter
from rungway.sim import Scenario, SimUpstream, StreamErrorFault
from tests.unit.adapters.calls import call_of

FIXTURES = Path(__file__).parents[2] / "fixtures"
START = 1_790_000_000.0
ACCOUNT = "a1b2c3d4-0000-4000-8000-000000000001"


def jwt(claims: dict[str, Any]) -> str:
    """An unsigned JWT carrying `claims` (the gateway never checks the signature)."""

    def part(value: object) -> str:
        return base64.urlsafe_b64encode(orjson.dumps(value)).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


ACCESS_TOKEN = jwt(
    {"sub": "user-1", "https://api.openai.com/auth": {"chatgpt_account_id": ACCOUNT}}
)
KEY = Connection(
    "key", "openai-responses", Auth.APIKEY, SecretStr("sk-k"), "http://up/v1", frozenset()
)
PLAN = Connection(
    "plan",
    "codex",
    Auth.OAUTH,
    SecretStr(ACCESS_TOKEN),
    "https://chatgpt.com/backend-api/codex",
    frozenset({"gpt-5-codex"}),
)

# A Codex backend stream in the shape recorded from the service: handshake events, an
# encrypted reasoning item, a message, and the terminal event carrying the usage.
MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant"}
REASONING = {"id": "rs_1", "type": "reasoning", "summary": []}
AT_TEXT = {"item_id": "msg_1", "output_index": 1, "content_index": 0}
USAGE = {
    "input_tokens": 1200,
    "input_tokens_details": {"cached_tokens": 1000},
    "output_tokens": 50,
    "output_tokens_details": {"reasoning_tokens": 30},
    "total_tokens": 1250,
}
RECORDED_EVENTS: list[dict[str, Any]] = [
    {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
    {"type": "response.in_progress", "response": {"id": "resp_1"}},
    {"type": "codex.rate_limits", "plan_type": "pro", "rate_limits": {"primary": {}}},
    {"type": "response.output_item.added", "output_index": 0, "item": REASONING},
    {
        "type": "response.output_item.done",
        "output_index": 0,
        "item": {**REASONING, "encrypted_content": "gAAA"},
    },
    {"type": "response.output_item.added", "output_index": 1, "item": {**MESSAGE, "content": []}},
    {"type": "response.content_part.added", **AT_TEXT, "part": {"type": "output_text", "text": ""}},
    {"type": "response.output_text.delta", **AT_TEXT, "delta": "Hello"},
    {"type": "response.output_text.done", **AT_TEXT, "text": "Hello"},
    {
        "type": "response.output_item.done",
        "output_index": 1,
        "item": {**MESSAGE, "content": [{"type": "output_text", "text": "Hello"}]},
    },
    {
        "type": "response.completed",
        "response": {"id": "resp_1", "status": "completed", "output": [], "usage": USAGE},
    },
]


def _event(data: dict[str, Any]) -> bytes:
    return b"event: " + str(data["type"]).encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


RECORDED = b"".join(
    _event({**data, "sequence_number": number}) for number, data in enumerate(RECORDED_EVENTS)
)


def build(
    adapter: OpenAIResponsesAdapter, connection: Connection, body: dict[str, Any], **headers: str
) -> UpstreamRequest:
    raw = orjson.dumps(body)
    return adapter.build_request(
        call_of(connection, body, raw=raw, model="gpt-5-codex", headers=headers)
    )


def watch(stream: bytes) -> tuple[OpenAIResponsesWatcher, list[tuple[str, EventKind]]]:
    watcher = OpenAIResponsesWatcher()
    kinds = [(event.event or "", watcher.see(event)) for event in SseSplitter().feed(stream)]
    return watcher, kinds


# --- Requests ---------------------------------------------------------------------------


def test_api_key_requests_go_to_responses_with_the_clients_bytes() -> None:
    raw = b'{"model":"gpt-5-codex","input":"hi","x_unknown":{"kept":1.50}}'
    request = OpenAIResponsesAdapter().build_request(
        call_of(
            KEY,
            orjson.loads(raw),
            raw=raw,
            model="gpt-5-codex",
            headers={
                "user-agent": "OpenAI/Python 2.16.0",
                "x-stainless-lang": "python",
                "cookie": "no",
            },
        )
    )
    assert request.url == "http://up/v1/responses"
    assert request.body is raw
    assert request.headers == {
        "user-agent": "OpenAI/Python 2.16.0",
        "x-stainless-lang": "python",
        "content-type": "application/json",
        "authorization": "Bearer sk-k",
    }


def test_codex_requests_carry_the_backends_headers_and_account() -> None:
    request = build(
        CodexAdapter(),
        PLAN,
        {"model": "codex", "input": "hi"},
        **{
            "user-agent": "codex_cli_rs/0.171.0",
            "session_id": "s-1",
            "x-codex-turn-metadata": "{}",
            "x-api-key": "no",
        },
    )
    assert request.url == "https://chatgpt.com/backend-api/codex/responses"
    assert request.headers == {
        "user-agent": "codex_cli_rs/0.171.0",
        "session_id": "s-1",
        "x-codex-turn-metadata": "{}",
        "originator": "codex_cli_rs",
        "content-type": "application/json",
        "accept": "text/event-stream",
        "openai-beta": "responses=experimental",
        "authorization": f"Bearer {ACCESS_TOKEN}",
        "chatgpt-account-id": ACCOUNT,
    }
    kept = build(CodexAdapter(), PLAN, {"model": "m"}, originator="codex_vscode")
    assert kept.headers["originator"] == "codex_vscode"


def test_codex_body_follows_the_backends_rules() -> None:
    body = {
        "model": "codex",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
        ],
        "stream": False,
        "store": True,
        "temperature": 0.2,
        "top_p": 0.9,
        "max_output_tokens": 500,
        "stream_options": {"include_obfuscation": False},
        "include": ["file_search_call.results"],
        "reasoning": {"effort": "high"},
        "x_unknown": [1],
    }
    sent = orjson.loads(build(CodexAdapter(), PLAN, body).body)
    assert sent == {
        "model": "gpt-5-codex",
        "input": body["input"],
        "instructions": "",
        "stream": True,
        "store": False,
        "include": ["file_search_call.results", "reasoning.encrypted_content"],
        "reasoning": {"effort": "high"},
        "x_unknown": [1],
    }
    again = codex_body(
        {"instructions": "Be brief.", "include": ["reasoning.encrypted_content"]}, "m"
    )
    assert (again["instructions"], again["include"]) == (
        "Be brief.",
        ["reasoning.encrypted_content"],
    )


@pytest.mark.parametrize(
    ("token", "account"),
    [
        (ACCESS_TOKEN, ACCOUNT),
        ("not-a-jwt", None),
        ("a.b.c", None),
        (jwt({"sub": "user-1"}), None),
        (jwt({"https://api.openai.com/auth": {"chatgpt_account_id": ""}}), None),
    ],
)
def test_account_id_comes_from_the_tokens_auth_claim(token: str, account: str | None) -> None:
    assert chatgpt_account_id(token) == account
    connection = Connection("p", "codex", Auth.OAUTH, SecretStr(token), "http://b", frozenset())
    headers = build(CodexAdapter(), connection, {"model": "m"}).headers
    assert headers.get("chatgpt-account-id") == account


# --- Failures, usage and quota ----------------------------------------------------------


RATE_LIMITED = FailureClass.RATE_LIMITED


def _error(code: str, message: str = "m", **fields: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **fields}}


def failure_of(
    adapter: OpenAIResponsesAdapter, status: int, error: object, **headers: str
) -> Failure:
    body = orjson.dumps(error)
    return adapter.classify_failure(status, CIMultiDict(headers), body)


@pytest.mark.parametrize(
    ("status", "body", "kind", "wait"),
    [
        (429, _error("rate_limit_exceeded", "Please try again in 1.5s."), RATE_LIMITED, 1.5),
        (429, _error("insufficient_quota", type="insufficient_quota"), FailureClass.BILLING, None),
        (400, _error("model_not_found"), FailureClass.MODEL_UNAVAILABLE, None),
        (400, _error("context_length_exceeded"), FailureClass.CONTEXT_TOO_LONG, None),
        (400, {"detail": "Stream must be set to true"}, FailureClass.BAD_REQUEST, None),
        (503, _error("server_is_overloaded"), FailureClass.OVERLOADED, None),
        (401, _error("invalid_api_key"), FailureClass.AUTH, None),
    ],
)
def test_api_key_failures_are_classified_as_openais(
    status: int, body: dict[str, Any], kind: FailureClass, wait: float | None
) -> None:
    failure = failure_of(OpenAIResponsesAdapter(), status, body)
    assert (failure.kind, failure.retry_after_s) == (kind, wait)
    if "detail" in body:
        assert failure.message == body["detail"]


def codex_cases() -> list[Any]:
    cases = json.loads((FIXTURES / "codex" / "errors.json").read_text())
    return [pytest.param(case, id=case["name"]) for case in cases]


@pytest.mark.parametrize("case", codex_cases())
def test_codex_errors_classify_and_name_their_windows(case: dict[str, Any]) -> None:
    body = case["raw_body"].encode() if "raw_body" in case else orjson.dumps(case["body"])
    adapter = CodexAdapter()
    failure = adapter.classify_failure(case["status"], CIMultiDict(), body)
    error = case.get("body", {}).get("error", {})
    expected = {
        "usage_limit_reached": FailureClass.QUOTA_EXHAUSTED,
        "usage_not_included": FailureClass.MODEL_UNAVAILABLE,
    }.get(
        error.get("type"),
        FailureClass.RATE_LIMITED if case["status"] == 429 else FailureClass.OVERLOADED,
    )
    assert failure.kind is expected
    windows = adapter.error_windows(
        PLAN, status=case["status"], headers={}, body=body, model="gpt-5-codex", now=case["now"]
    )
    assert [(w.name, w.status.value, w.resets_at) for w in windows] == [
        (w["name"], w["status"], w["resets_at"]) for w in case["windows"]
    ]


def test_codex_plan_exhaustion_waits_for_the_reset_it_names() -> None:
    body = {"error": {"type": "usage_limit_reached", "message": "spent", "resets_in_seconds": 600}}
    assert failure_of(CodexAdapter(), 429, body).retry_after_s == 600.0
    capacity = {"error": {"message": "Selected model is at capacity. Please try a different model"}}
    assert failure_of(CodexAdapter(), 500, capacity).kind is FailureClass.OVERLOADED


def test_usage_splits_cached_input_out() -> None:
    usage = OpenAIResponsesAdapter().read_usage(
        {
            "usage": {
                "input_tokens": 1200,
                "input_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 50},
                "output_tokens": 50,
                "output_tokens_details": {"reasoning_tokens": 30},
                "total_tokens": 1250,
            }
        }
    )
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        150,
        1000,
        50,
    )
    assert (usage.output_tokens, usage.reasoning_tokens) == (50, 30)
    assert OpenAIResponsesAdapter().read_usage({}).input_tokens == 0


def test_api_keys_read_x_ratelimit_and_plans_read_x_codex() -> None:
    key_headers = CIMultiDict(
        {
            "x-ratelimit-limit-requests": "60",
            "x-ratelimit-remaining-requests": "30",
            "x-ratelimit-reset-requests": "1s",
        }
    )
    windows = OpenAIResponsesAdapter().read_quota(KEY, model="m", headers=key_headers, now=START)
    assert [(w.name, w.used_percent) for w in windows] == [("requests", 50.0)]
    recorded = json.loads((FIXTURES / "codex" / "quota_headers.json").read_text())[0]
    codex_windows = CodexAdapter().read_quota(
        PLAN, model="m", headers=CIMultiDict(recorded["headers"]), now=recorded["now"]
    )
    assert [(w.name, w.used_percent, w.resets_at) for w in codex_windows] == [
        ("7d", 9.0, 1790426679)
    ]


def test_codex_usage_endpoint_is_wham_usage_beside_the_backend() -> None:
    target = CodexAdapter().usage_target(PLAN)
    assert target is not None
    assert target.url == "https://chatgpt.com/backend-api/wham/usage"
    assert target.headers == {
        "authorization": f"Bearer {ACCESS_TOKEN}",
        "accept": "application/json",
        "chatgpt-account-id": ACCOUNT,
    }
    elsewhere = Connection(
        "p", "codex", Auth.OAUTH, SecretStr("t"), "http://proxy/codex", frozenset()
    )
    other = CodexAdapter().usage_target(elsewhere)
    assert other is not None
    assert other.url == "http://proxy/api/codex/usage"
    moved = Connection(
        "p", "codex", Auth.OAUTH, SecretStr("t"), "http://b", frozenset(), "http://u/backend-api"
    )
    moved_target = CodexAdapter().usage_target(moved)
    assert moved_target is not None
    assert moved_target.url == "http://u/backend-api/wham/usage"
    keyless = Connection("p", "codex", Auth.OAUTH, None, "http://b", frozenset())
    assert CodexAdapter().usage_target(keyless) is None


# --- Streams ----------------------------------------------------------------------------


def test_watcher_holds_everything_before_the_first_text_and_reads_usage_at_the_end() -> None:
    watcher, kinds = watch(RECORDED)
    # The reasoning item is encrypted, and the message opens empty: the user sees nothing
    # before the first text delta, so the stream can still fall through until then.
    assert kinds[:8] == [
        ("response.created", EventKind.PREAMBLE),
        ("response.in_progress", EventKind.PREAMBLE),
        ("codex.rate_limits", EventKind.PREAMBLE),
        ("response.output_item.added", EventKind.PREAMBLE),
        ("response.output_item.done", EventKind.PREAMBLE),
        ("response.output_item.added", EventKind.PREAMBLE),
        ("response.content_part.added", EventKind.PREAMBLE),
        ("response.output_text.delta", EventKind.CONTENT),
    ]
    assert {kind for _, kind in kinds[8:]} == {EventKind.CONTENT}
    assert watcher.finished
    assert watcher.failure is None
    usage = watcher.usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (200, 1000, 50)
    assert usage.reasoning_tokens == 30


def test_watcher_takes_the_type_from_data_when_there_is_no_event_line() -> None:
    bare = (
        b'data: {"type":"response.created","sequence_number":0}\n\n'
        b'data: {"type":"response.output_text.delta","delta":"x"}\n\n'
    )
    _, kinds = watch(bare)
    assert [kind for _, kind in kinds] == [EventKind.PREAMBLE, EventKind.CONTENT]


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("usage_limit_reached", FailureClass.QUOTA_EXHAUSTED),
        ("rate_limit_exceeded", FailureClass.RATE_LIMITED),
        ("server_is_overloaded", FailureClass.OVERLOADED),
        ("slow_down", FailureClass.OVERLOADED),
        ("insufficient_quota", FailureClass.BILLING),
        ("usage_not_included", FailureClass.MODEL_UNAVAILABLE),
        ("context_length_exceeded", FailureClass.CONTEXT_TOO_LONG),
        ("server_error", FailureClass.SERVER),
        (None, FailureClass.SERVER),
    ],
)
def test_in_stream_failures_are_classified_by_code(code: str | None, kind: FailureClass) -> None:
    failed = {
        "type": "response.failed",
        "sequence_number": 2,
        "response": {"error": {"code": code, "message": "Please try again in 2s."}},
    }
    top_level = {"type": "error", "sequence_number": 2, "code": code, "message": "m", "param": None}
    handshake = RECORDED.split(b"event: response.output_item.added")[0]
    for data in (failed, top_level):
        watcher, kinds = watch(handshake + _event(data))
        assert kinds[-1][1] is EventKind.ERROR
        assert watcher.failure is not None
        assert watcher.failure.kind is kind
    rate_limited = watch(handshake + _event(failed))[0].failure
    if kind is FailureClass.RATE_LIMITED:
        assert rate_limited is not None
        assert rate_limited.retry_after_s == 2.0


def test_assembling_a_stream_rebuilds_the_output_from_done_items() -> None:
    response = assemble_response(RECORDED)
    assert isinstance(response, dict)
    assert response["id"] == "resp_1"
    assert [item["type"] for item in response["output"]] == ["reasoning", "message"]
    assert response["usage"]["output_tokens"] == 50
    cut = assemble_response(RECORDED.split(b"event: response.completed")[0])
    assert isinstance(cut, Failure)
    assert cut.kind is FailureClass.NETWORK
    failed = {
        "type": "response.failed",
        "response": {"error": {"code": "server_error", "message": "x"}},
    }
    broken = assemble_response(RECORDED[:200].rsplit(b"\n\n", 1)[0] + b"\n\n" + _event(failed))
    assert isinstance(broken, Failure)
    assert broken.kind is FailureClass.SERVER


# --- Against the simulated Codex backend ------------------------------------------------


@pytest.fixture(scope="module")
def codex_sim() -> Iterator[SimUpstream]:
    scenario = Scenario.model_validate(
        {
            "name": "adapter-codex",
            "api": "responses",
            "quota_headers": "codex",
            "usage_endpoint": "codex",
            "auth": {"kind": "bearer", "token": ACCESS_TOKEN},
            "models": [{"id": "gpt-5-codex"}],
            "windows": [
                {"name": "5h", "unit": "requests", "capacity": 4, "length_s": 18000},
                {"name": "7d", "unit": "requests", "capacity": 10, "length_s": 604800},
            ],
            "clock": {"start": START},
            "response": {"output_tokens": 12, "chunk_tokens": 4},
        }
    )
    with SimUpstream(scenario) as sim:
        yield sim


def sim_subscription(sim: SimUpstream) -> Connection:
    return Connection(
        "plan",
        "codex",
        Auth.OAUTH,
        SecretStr(ACCESS_TOKEN),
        f"{sim.url}/backend-api/codex",
        frozenset(),
    )


def test_a_non_streaming_client_request_passes_the_backends_checks(codex_sim: SimUpstream) -> None:
    codex_sim.reset()
    adapter = CodexAdapter()
    connection = sim_subscription(codex_sim)
    request = build(
        adapter, connection, {"model": "gpt-5-codex", "input": "hi", "max_output_tokens": 64}
    )
    response = httpx.post(request.url, headers=request.headers, content=request.body)
    assert response.status_code == 200
    assert codex_sim.requests[-1].header("chatgpt-account-id") == ACCOUNT
    watcher, _ = watch(response.content)
    assert watcher.finished
    assert watcher.usage.output_tokens == 12
    assembled = adapter.assemble_stream(response.content)
    assert isinstance(assembled, dict)
    assert assembled["output"][0]["content"][0]["text"].startswith("The simulated upstream")
    windows = adapter.read_quota(
        connection, model="gpt-5-codex", headers=response.headers, now=START
    )
    assert [(w.name, w.used_percent) for w in windows] == [("5h", 25.0), ("7d", 10.0)]
    target = adapter.usage_target(connection)
    assert target is not None
    polled = httpx.get(target.url, headers=dict(target.headers))
    assert [w.name for w in target.read(polled.content, START).windows] == ["5h", "7d"]


def test_a_failed_sim_stream_fails_the_watcher_before_content(codex_sim: SimUpstream) -> None:
    codex_sim.reset()
    codex_sim.push_fault(StreamErrorFault(after_events=2, error_type="usage_limit_reached"))
    request = build(
        CodexAdapter(),
        sim_subscription(codex_sim),
        {"model": "gpt-5-codex", "input": "hi", "stream": True},
    )
    response = httpx.post(request.url, headers=request.headers, content=request.body)
    watcher, kinds = watch(response.content)
    assert [kind for _, kind in kinds] == [EventKind.PREAMBLE, EventKind.PREAMBLE, EventKind.ERROR]
    assert watcher.failure is not None
    assert watcher.failure.kind is FailureClass.QUOTA_EXHAUSTED


def test_the_registry_and_config_know_both_providers() -> None:
    codex = provider_entry("codex")
    assert isinstance(codex.adapter, CodexAdapter)
    assert codex.default_base_url == "https://chatgpt.com/backend-api/codex"
    assert isinstance(codex.adapter, HasUsageEndpoint)
    assert isinstance(codex.adapter, ErrorQuota)
    keyed = provider_entry("openai-responses")
    assert type(keyed.adapter) is OpenAIResponsesAdapter
    assert keyed.default_base_url == "https://api.openai.com/v1"
    assert keyed.adapter.api is Api.OPENAI_RESPONSES
    assert not isinstance(keyed.adapter, ErrorQuota)
    assert {"codex", "openai-responses"} <= set(PROVIDERS)
    assert provider_entry("openai").adapter.api is Api.OPENAI_CHAT
