"""OpenAI Responses wire helpers: request checks, errors, the in-stream failure and the
preamble test, each checked against the official SDK's types."""

from __future__ import annotations

from typing import Any

import httpx2
import openai
import orjson
import pytest
from openai.types.responses import (
    Response,
    ResponseFailedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseReasoningItem,
    ResponseStreamEvent,
    ResponseUsage,
)
from pydantic import TypeAdapter

from rungway.protocol.failures import FailureClass
from rungway.protocol.openai_responses import (
    UNKNOWN_RESPONSE_ID,
    UNSEQUENCED,
    check_request,
    error_body,
    function_call_item,
    function_tool,
    message_item,
    message_text,
    reasoning_item,
    reasoning_text,
    response_object,
    responses_id,
    stream_error_event,
    tool_choice,
    usage_object,
)
from rungway.protocol.sse import SseSplitter

STREAM_EVENT: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)


@pytest.mark.parametrize(
    "body",
    [
        {"model": "gpt-5", "input": "hi"},
        {"model": "gpt-5", "input": [{"role": "user", "content": "hi"}], "stream": True},
        {"model": "gpt-5", "input": [], "instructions": "be brief", "tools": []},
        {"model": "gpt-5", "input": "hi", "stream": None, "instructions": None},
    ],
)
def test_routable_requests_pass(body: dict[str, Any]) -> None:
    assert check_request(body) is None


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ({"input": "hi"}, "`model`"),
        ({"model": "", "input": "hi"}, "`model`"),
        ({"model": 4, "input": "hi"}, "`model`"),
        ({"model": "m"}, "`input`"),
        ({"model": "m", "input": 3}, "`input`"),
        ({"model": "m", "input": ["hi"]}, "every item of `input`"),
        ({"model": "m", "input": "hi", "stream": "yes"}, "`stream`"),
        ({"model": "m", "input": "hi", "instructions": ["a"]}, "`instructions`"),
        ({"model": "m", "input": "hi", "tools": {"type": "function"}}, "`tools`"),
    ],
)
def test_malformed_requests_say_what_is_wrong(body: dict[str, Any], complaint: str) -> None:
    problem = check_request(body)
    assert problem is not None
    assert complaint in problem


@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, "invalid_request_error"), (429, "rate_limit_error"), (503, "server_error")],
)
def test_error_body_has_openai_shape(status: int, kind: str) -> None:
    body = orjson.loads(error_body(status, "nope", "some_code"))
    assert body == {"error": {"message": "nope", "type": kind, "param": None, "code": "some_code"}}


def frames(raw: bytes) -> list[dict[str, Any]]:
    """The data of every frame in `raw`, checking each frame's name equals its type."""
    events = SseSplitter().feed(raw)
    assert b"".join(event.raw for event in events) == raw
    datas = [orjson.loads(event.data) for event in events]
    assert [event.event for event in events] == [data["type"] for data in datas]
    return datas


@pytest.mark.parametrize(
    ("kind", "code"),
    [
        (None, "server_error"),
        (FailureClass.RATE_LIMITED, "rate_limit_exceeded"),
        (FailureClass.QUOTA_EXHAUSTED, "rate_limit_exceeded"),
        (FailureClass.OVERLOADED, "server_error"),
        (FailureClass.BAD_REQUEST, "invalid_prompt"),
        (FailureClass.CONTEXT_TOO_LONG, "server_error"),
        (FailureClass.TIMEOUT, "server_error"),
    ],
)
def test_stream_error_is_a_failed_response(kind: FailureClass | None, code: str) -> None:
    (data,) = frames(stream_error_event("upstream went away", kind))
    event = STREAM_EVENT.validate_python(data)
    assert isinstance(event, ResponseFailedEvent)
    assert event.sequence_number == UNSEQUENCED
    assert event.response.id == UNKNOWN_RESPONSE_ID
    assert event.response.status == "failed"
    assert event.response.error is not None
    assert event.response.error.code == code
    assert event.response.error.message == "upstream went away"
    assert event.response.error.type == (kind.value if kind else "server_error")


def test_the_sdk_reads_the_stream_error_as_a_failed_response() -> None:
    body = stream_error_event("overloaded", FailureClass.OVERLOADED)
    headers = {"content-type": "text/event-stream"}
    transport = httpx2.MockTransport(lambda _: httpx2.Response(200, content=body, headers=headers))
    client = openai.OpenAI(
        base_url="http://gateway.test/v1",
        api_key="k",
        http_client=httpx2.Client(transport=transport),
        max_retries=0,
    )
    (event,) = list(client.responses.create(model="m", input="hi", stream=True))
    assert isinstance(event, ResponseFailedEvent)
    assert event.response.error is not None
    assert event.response.error.message == "overloaded"


def test_items_and_usage_match_the_sdk_types() -> None:
    message = ResponseOutputMessage.model_validate(message_item("msg_1", ["Hel", "lo"]))
    assert [part.text for part in message.content if part.type == "output_text"] == ["Hel", "lo"]
    assert message_text(message_item("msg_1", ["Hel", "lo"])) == "Hello"
    call = ResponseFunctionToolCall.model_validate(function_call_item("fc_1", "call_1", "f", "{}"))
    assert (call.call_id, call.name, call.arguments, call.status) == (
        "call_1",
        "f",
        "{}",
        "completed",
    )
    reasoning = ResponseReasoningItem.model_validate(reasoning_item("rs_1", "why", "opaque"))
    assert reasoning.encrypted_content == "opaque"
    assert reasoning_text(reasoning_item("rs_1", "why", None)) == "why"
    assert "encrypted_content" not in reasoning_item("rs_1", "", None)
    usage = ResponseUsage.model_validate(
        usage_object(input_tokens=10, cached=4, cache_writes=2, output_tokens=5, reasoning=3)
    )
    assert usage.total_tokens == 15
    assert usage.input_tokens_details.cached_tokens == 4


def test_response_object_matches_the_sdk_type() -> None:
    tool = function_tool("f", "does f", {"type": "object"})
    echo = {"tools": [tool], "tool_choice": tool_choice(name="f"), "instructions": "be brief"}
    body = response_object(
        "resp_1", "m", 1.5, "incomplete", [], incomplete_reason="max_output_tokens", echo=echo
    )
    response = Response.model_validate(body)
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.instructions == "be brief"
    assert tool == {
        "type": "function",
        "name": "f",
        "description": "does f",
        "parameters": {"type": "object"},
        "strict": False,
    }
    assert [tool_choice(choice) for choice in ("auto", "none", "required")] == [
        "auto",
        "none",
        "required",
    ]


@pytest.mark.parametrize(
    ("upstream", "expected"),
    [("resp_1", "resp_1"), ("msg_01", "resp_msg_01"), ("", "resp_gateway")],
)
def test_response_ids_take_the_resp_prefix(upstream: str, expected: str) -> None:
    assert responses_id(upstream) == expected
