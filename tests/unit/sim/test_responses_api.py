"""The simulated Responses API, public and Codex backend: framing, usage, faults, quota."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import orjson
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter, ValidationError

from rungway.protocol.sse import SseEvent
from rungway.sim import (
    HttpErrorFault,
    QuotaExhaustedFault,
    Scenario,
    SimUpstream,
    StreamErrorFault,
    builtin_scenario,
    load_scenario,
)
from rungway.sim.wire.responses_api import CODEX_PATH, PUBLIC_PATH

from .conftest import START, RawResponse, request

TOKEN = "sim-codex-responses-token"
AUTH = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
TEXT_20 = (
    "The simulated upstream answers with a fixed and predictable reply so that tests, "
    "demos and benchmarks can count every token"
)
EVENT = TypeAdapter[Any](ResponseStreamEvent)
SHELL_TOOL = {
    "type": "function",
    "name": "shell_command",
    "description": "Runs a shell command.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    "strict": False,
}


def responses_scenario() -> Scenario:
    """A Codex plan served over the Responses API: 4 requests per 5h, 10 per week."""
    return Scenario.model_validate(
        {
            "name": "test-responses",
            "api": "responses",
            "quota_headers": "codex",
            "usage_endpoint": "codex",
            "codex": {"plan_type": "pro"},
            "auth": {"kind": "bearer", "token": TOKEN},
            "models": [{"id": "gpt-5-codex", "max_output_tokens": 1000, "context_window": 900}],
            "windows": [
                {"name": "5h", "unit": "requests", "capacity": 4, "length_s": 18000},
                {"name": "7d", "unit": "requests", "capacity": 10, "length_s": 604800},
            ],
            "clock": {"start": START},
            "response": {
                "output_tokens": 20,
                "chunk_tokens": 6,
                "tool_calls": [{"name": "shell_command", "input": {"command": "echo hi"}}],
            },
        }
    )


@pytest.fixture(scope="module")
def _responses_server() -> Iterator[SimUpstream]:
    with SimUpstream(responses_scenario()) as sim:
        yield sim


@pytest.fixture
def sim(_responses_server: SimUpstream) -> SimUpstream:
    """The Responses sim, reset."""
    _responses_server.reset()
    return _responses_server


def body(**overrides: Any) -> dict[str, Any]:
    """A minimal Responses request body."""
    return {"model": "gpt-5-codex", "input": "Hello there", **overrides}


def codex_body(**overrides: Any) -> dict[str, Any]:
    """A request body as the Codex backend takes it (docs/provider-signals.md A4.2)."""
    return body(instructions="", store=False, stream=True, **overrides)


def events_of(response: RawResponse) -> list[tuple[SseEvent, dict[str, Any]]]:
    """Every event with its parsed data, each checked against the SDK's event types."""
    parsed = []
    for event in response.events():
        data = orjson.loads(event.data)
        EVENT.validate_python(data)
        parsed.append((event, data))
    return parsed


def test_sdk_round_trip_is_a_complete_response_with_usage(sim: SimUpstream) -> None:
    with openai.OpenAI(base_url=f"{sim.url}/v1", api_key=TOKEN, max_retries=0) as client:
        response = client.responses.create(model="gpt-5-codex", input="Hello there")
    assert response.id.startswith("resp_")
    assert (response.status, response.output_text) == ("completed", TEXT_20)
    assert response.created_at == int(START)
    usage = response.usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (5, 20, 25)
    assert usage.input_tokens_details.cached_tokens == 0
    assert usage.output_tokens_details.reasoning_tokens == 0
    tally = sim.tally.by_model()["gpt-5-codex"]
    assert (tally.requests, tally.input_tokens, tally.output_tokens) == (1, 5, 20)


def test_non_streamed_body_is_a_valid_response_object(sim: SimUpstream) -> None:
    response = request(sim.url, "POST", PUBLIC_PATH, body(max_output_tokens=16), AUTH)
    assert response.status == 200
    assert response.header("x-request-id") is not None
    parsed = Response.model_validate(response.json())
    assert (parsed.status, parsed.max_output_tokens) == ("incomplete", 16)
    assert parsed.incomplete_details is not None
    assert parsed.incomplete_details.reason == "max_output_tokens"
    assert len(parsed.output_text.split()) == 16


def test_stream_frames_are_named_numbered_and_end_with_completed(sim: SimUpstream) -> None:
    response = request(sim.url, "POST", PUBLIC_PATH, body(stream=True), AUTH)
    assert response.status == 200
    assert response.header("content-type") == "text/event-stream; charset=utf-8"
    assert b"[DONE]" not in response.body
    events = events_of(response)
    assert all(event.event == data["type"] for event, data in events)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    kinds = [data["type"] for _, data in events]
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * 4,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    created, final = events[0][1]["response"], events[-1][1]["response"]
    assert created["id"] == final["id"]
    assert (created["status"], created["usage"]) == ("in_progress", None)
    deltas = "".join(data["delta"] for _, data in events if data["type"].endswith(".delta"))
    assert deltas == TEXT_20
    item = events[-2][1]["item"]
    assert item["content"][0]["text"] == TEXT_20
    assert item["status"] == "completed"
    assert Response.model_validate(final).output_text == TEXT_20
    assert final["usage"] == {
        "input_tokens": 5,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 25,
    }


def test_sdk_stream_parses_every_event(sim: SimUpstream) -> None:
    with openai.OpenAI(base_url=f"{sim.url}/v1", api_key=TOKEN, max_retries=0) as client:
        events = list(client.responses.create(model="gpt-5-codex", input="Hi", stream=True))
    assert events[-1].type == "response.completed"
    assert events[-1].response.output_text == TEXT_20


def test_codex_backend_path_serves_the_same_dialect_with_codex_headers(sim: SimUpstream) -> None:
    response = request(sim.url, "POST", CODEX_PATH, codex_body(), AUTH)
    assert response.status == 200
    assert response.header("x-codex-plan-type") == "pro"
    assert response.header("x-codex-primary-window-minutes") == "300"
    assert response.header("x-codex-primary-used-percent") == "25.0"
    assert response.header("x-codex-secondary-window-minutes") == "10080"
    events = events_of(response)
    assert events[-1][1]["type"] == "response.completed"
    assert sim.requests[-1].path == CODEX_PATH


@pytest.mark.parametrize(
    ("changes", "detail"),
    [
        ({"instructions": None}, "Instructions are required"),
        ({"store": None}, "Store must be set to false"),
        ({"store": True}, "Store must be set to false"),
        ({"stream": False}, "Stream must be set to true"),
        ({"max_output_tokens": 500}, "Unsupported parameter: max_output_tokens"),
        (
            {"model": "gpt-4o"},
            "The 'gpt-4o' model is not supported when using Codex with a ChatGPT account.",
        ),
    ],
)
def test_codex_backend_refuses_what_the_real_one_refuses(
    sim: SimUpstream, changes: dict[str, Any], detail: str
) -> None:
    sent = {key: value for key, value in {**codex_body(), **changes}.items() if value is not None}
    response = request(sim.url, "POST", CODEX_PATH, sent, AUTH)
    assert (response.status, response.json()) == (400, {"detail": detail})
    assert sim.tally.total().requests == 0


@pytest.mark.parametrize(
    ("sent", "status", "code"),
    [
        ({"input": "hi"}, 400, "missing_required_parameter"),
        (body(model="gpt-9"), 400, "model_not_found"),
        (body(max_output_tokens=5), 400, "integer_below_min_value"),
        (body(input="word " * 1000), 400, "context_length_exceeded"),
    ],
)
def test_public_api_refusals_are_openai_errors(
    sim: SimUpstream, sent: dict[str, Any], status: int, code: str
) -> None:
    response = request(sim.url, "POST", PUBLIC_PATH, sent, AUTH)
    assert response.status == status
    error = response.json()["error"]
    assert (error["code"], error["type"]) == (code, "invalid_request_error")


def test_a_wrong_key_gets_openais_401(sim: SimUpstream) -> None:
    wrong = {**AUTH, "authorization": "Bearer nope"}
    response = request(sim.url, "POST", PUBLIC_PATH, body(), wrong)
    assert response.status == 401
    assert response.json()["error"]["code"] == "invalid_api_key"


def test_an_output_cap_ends_the_stream_incomplete(sim: SimUpstream) -> None:
    response = request(sim.url, "POST", PUBLIC_PATH, body(stream=True, max_output_tokens=16), AUTH)
    events = events_of(response)
    final = events[-1][1]
    assert final["type"] == "response.incomplete"
    assert final["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert final["response"]["usage"]["output_tokens"] == 16
    assert events[-2][1]["item"]["status"] == "incomplete"


def test_in_stream_error_is_response_failed_in_sequence(sim: SimUpstream) -> None:
    sim.push_fault(StreamErrorFault(after_events=3))
    response = request(sim.url, "POST", PUBLIC_PATH, body(stream=True), AUTH)
    events = events_of(response)
    assert [data["sequence_number"] for _, data in events] == [0, 1, 2, 3]
    failed = events[-1][1]
    assert failed["type"] == "response.failed"
    assert failed["response"]["id"] == events[0][1]["response"]["id"]
    assert failed["response"]["status"] == "failed"
    error = failed["response"]["error"]
    assert error["code"] == "server_error"
    assert error["message"].startswith("An error occurred while processing your request.")
    assert sim.tally.total().requests == 0
    assert [reply.delivered for reply in sim.replies] == [False]


def test_in_stream_error_carries_the_faults_code(sim: SimUpstream) -> None:
    fault = StreamErrorFault(after_events=2, error_type="usage_limit_reached", message="spent")
    sim.push_fault(fault)
    response = request(sim.url, "POST", CODEX_PATH, codex_body(), AUTH)
    failed = orjson.loads(response.events()[-1].data)
    assert failed["sequence_number"] == 2
    assert failed["response"]["error"] == {"code": "usage_limit_reached", "message": "spent"}
    with pytest.raises(ValidationError):
        # The SDK knows only the public API's codes; the Codex client reads any code.
        EVENT.validate_python(failed)


def test_http_error_fault_is_openai_shaped_with_quota_headers(sim: SimUpstream) -> None:
    fault = HttpErrorFault(status=503, code="server_is_overloaded", quota_headers=True)
    sim.push_fault(fault)
    response = request(sim.url, "POST", CODEX_PATH, codex_body(), AUTH)
    assert response.status == 503
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("server_error", "server_is_overloaded")
    assert response.header("x-codex-primary-used-percent") == "0.0"


def test_spent_plan_is_429_usage_limit_reached(sim: SimUpstream) -> None:
    sim.push_fault(QuotaExhaustedFault())
    response = request(sim.url, "POST", CODEX_PATH, codex_body(), AUTH)
    assert response.status == 429
    error = response.json()["error"]
    assert error["type"] == "usage_limit_reached"
    assert error["plan_type"] == "pro"
    assert str(error["resets_at"]) == response.header("x-codex-primary-reset-at")
    assert response.header("x-codex-primary-used-percent") == "100.0"


def test_offered_tool_is_called_with_complete_arguments(sim: SimUpstream) -> None:
    sent = codex_body(tools=[SHELL_TOOL])
    response = request(sim.url, "POST", CODEX_PATH, sent, AUTH)
    events = events_of(response)
    kinds = [data["type"] for _, data in events]
    assert "response.output_text.delta" not in kinds
    fragments = [data["delta"] for _, data in events if data["type"].endswith("arguments.delta")]
    assert "".join(fragments) == '{"command":"echo hi"}'
    done = next(data for _, data in events if data["type"] == "response.output_item.done")
    item = done["item"]
    assert (item["type"], item["name"], item["status"]) == (
        "function_call",
        "shell_command",
        "completed",
    )
    assert orjson.loads(item["arguments"]) == {"command": "echo hi"}
    assert item["call_id"].startswith("call_")
    final = Response.model_validate(events[-1][1]["response"])
    assert final.output[0].type == "function_call"
    (reply,) = sim.replies
    assert reply.tool_call is not None
    assert (reply.tool_call.name, reply.tool_call.input) == (
        "shell_command",
        {"command": "echo hi"},
    )


def test_tool_output_is_quoted_back(sim: SimUpstream) -> None:
    output = "hi\n" + "x" * 300
    turn = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "run"}]},
        {"type": "function_call", "call_id": "call_1", "name": "shell_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": output},
    ]
    with openai.OpenAI(base_url=f"{sim.url}/v1", api_key=TOKEN, max_retries=0) as client:
        response = client.responses.create(
            model="gpt-5-codex",
            input=turn,  # type: ignore[arg-type]
            tools=[SHELL_TOOL],  # type: ignore[list-item]
        )
    assert response.output_text == "The tool returned: " + output[:200]
    assert sim.replies[0].tool_result == output[:200]


def test_plan_usage_endpoint_shares_the_responses_credential(sim: SimUpstream) -> None:
    assert request(sim.url, "GET", "/backend-api/wham/usage", None, AUTH).status == 200
    refused = request(sim.url, "GET", "/backend-api/wham/usage", None, {"authorization": "x"})
    assert refused.status == 401


def test_builtin_codex_plan_serves_the_responses_api() -> None:
    codex = load_scenario(builtin_scenario("codex-plan"))
    assert (codex.api, codex.quota_headers, codex.usage_endpoint) == (
        "responses",
        "codex",
        "codex",
    )
    raw = codex.model_dump(mode="json")
    with pytest.raises(ValidationError, match="codex header family"):
        Scenario.model_validate({**raw, "api": "anthropic", "usage_endpoint": "none"})
    assert Scenario.model_validate({**raw, "api": "openai"}).api == "openai"
