"""The simulated model calls offered tools and quotes tool results, in all three wire APIs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import orjson
import pytest
from anthropic.types import Message, RawMessageStreamEvent
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response
from pydantic import TypeAdapter

from rungway.sim import Scenario, SimUpstream

from .conftest import START, chat_body, message_body, request

KEY = "sim-tool-key"
BASH_INPUT = {"command": "echo hi", "description": "Print hi"}
SHELL_INPUT = {"command": "echo hi"}
TOOL_CALLS = [
    {"name": "Bash", "input": BASH_INPUT},
    {"name": "shell_command", "input": SHELL_INPUT},
]
LONG_RESULT = "hi\n" + "".join(f"line {n}\n" for n in range(60))
QUOTE = "The tool returned: " + LONG_RESULT[:200]
SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}}}
ANTHROPIC_BASH = {"name": "Bash", "description": "Run a command.", "input_schema": SCHEMA}
CHAT_BASH = {"type": "function", "function": {"name": "Bash", "parameters": SCHEMA}}
CHAT_SHELL = {"type": "function", "function": {"name": "shell_command", "parameters": SCHEMA}}
RESPONSES_SHELL = {"type": "function", "name": "shell_command", "parameters": SCHEMA}
ANTHROPIC_EVENT = TypeAdapter[Any](RawMessageStreamEvent)


def scenario(api: str) -> Scenario:
    """A keyless sim of `api` whose model calls `Bash` or `shell_command` when offered."""
    return Scenario.model_validate(
        {
            "name": f"tools-{api}",
            "api": api,
            "models": [{"id": "m"}],
            "clock": {"start": START},
            "response": {"output_tokens": 5, "chunk_tokens": 2, "tool_calls": TOOL_CALLS},
        }
    )


@pytest.fixture(scope="module")
def _sims() -> Iterator[dict[str, SimUpstream]]:
    sims = {api: SimUpstream(scenario(api)) for api in ("anthropic", "openai", "responses")}
    for sim in sims.values():
        sim.start()
    try:
        yield sims
    finally:
        for sim in sims.values():
            sim.stop()


@pytest.fixture
def claude(_sims: dict[str, SimUpstream]) -> SimUpstream:
    """The Messages sim, reset."""
    _sims["anthropic"].reset()
    return _sims["anthropic"]


@pytest.fixture
def chat(_sims: dict[str, SimUpstream]) -> SimUpstream:
    """The Chat Completions sim, reset."""
    _sims["openai"].reset()
    return _sims["openai"]


@pytest.fixture
def responses(_sims: dict[str, SimUpstream]) -> SimUpstream:
    """The Responses sim, reset."""
    _sims["responses"].reset()
    return _sims["responses"]


ANTHROPIC_HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
OPENAI_HEADERS = {"authorization": f"Bearer {KEY}"}


def claude_client(sim: SimUpstream) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=sim.url, api_key=KEY, max_retries=0)


def openai_client(sim: SimUpstream) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{sim.url}/v1", api_key=KEY, max_retries=0)


# --- Anthropic Messages -----------------------------------------------------------------


def test_messages_reply_to_an_offered_tool_is_a_tool_use_block(claude: SimUpstream) -> None:
    sent = message_body(model="m", tools=[ANTHROPIC_BASH])
    response = request(claude.url, "POST", "/v1/messages", sent, ANTHROPIC_HEADERS)
    message = Message.model_validate(response.json())
    assert message.stop_reason == "tool_use"
    (block,) = message.content
    assert block.type == "tool_use"
    assert (block.name, block.input) == ("Bash", BASH_INPUT)
    assert block.id.startswith("toolu_")
    tally = claude.tally.total()
    assert (tally.requests, tally.output_tokens) == (1, len(orjson.dumps(BASH_INPUT)) // 4)


def test_messages_stream_sends_the_input_as_json_deltas(claude: SimUpstream) -> None:
    sent = message_body(model="m", tools=[ANTHROPIC_BASH], stream=True)
    response = request(claude.url, "POST", "/v1/messages", sent, ANTHROPIC_HEADERS)
    events = [orjson.loads(event.data) for event in response.events()]
    for event in events:
        if event["type"] != "ping":  # the SDK's event union leaves `ping` out
            ANTHROPIC_EVENT.validate_python(event)
    start = next(e for e in events if e["type"] == "content_block_start")
    assert start["content_block"]["input"] == {}
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    assert {delta["type"] for delta in deltas} == {"input_json_delta"}
    assert deltas[0]["partial_json"] == ""
    assert orjson.loads("".join(d["partial_json"] for d in deltas)) == BASH_INPUT
    stop = next(e for e in events if e["type"] == "message_delta")
    assert stop["delta"]["stop_reason"] == "tool_use"


def test_messages_sdk_stream_assembles_the_tool_call(claude: SimUpstream) -> None:
    with (
        claude_client(claude) as client,
        client.messages.stream(
            model="m",
            max_tokens=100,
            messages=[{"role": "user", "content": "list files"}],
            tools=[ANTHROPIC_BASH],  # type: ignore[list-item]
        ) as stream,
    ):
        final = stream.get_final_message()
    block = final.content[0]
    assert block.type == "tool_use"
    assert block.input == BASH_INPUT


@pytest.mark.parametrize(
    "content",
    [
        LONG_RESULT,
        [{"type": "text", "text": LONG_RESULT[:150]}, {"type": "text", "text": LONG_RESULT[150:]}],
    ],
)
def test_messages_tool_result_is_quoted(claude: SimUpstream, content: object) -> None:
    messages: list[Any] = [
        {"role": "user", "content": "list files"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": BASH_INPUT}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": content}],
        },
    ]
    with claude_client(claude) as client:
        message = client.messages.create(
            model="m",
            max_tokens=500,
            messages=messages,
            tools=[ANTHROPIC_BASH],  # type: ignore[list-item]
        )
    assert message.stop_reason == "end_turn"
    block = message.content[0]
    assert block.type == "text"
    assert block.text == QUOTE
    (reply,) = claude.replies
    assert (reply.tool_call, reply.tool_result, reply.text) == (None, LONG_RESULT[:200], QUOTE)


def test_messages_without_the_tool_or_with_tool_choice_none_get_text(claude: SimUpstream) -> None:
    other = {**ANTHROPIC_BASH, "name": "Read"}
    plain = message_body(model="m", tools=[other])
    forbidden = message_body(model="m", tools=[ANTHROPIC_BASH], tool_choice={"type": "none"})
    for sent in (plain, forbidden):
        response = request(claude.url, "POST", "/v1/messages", sent, ANTHROPIC_HEADERS)
        assert response.json()["content"][0]["type"] == "text"
        assert response.json()["stop_reason"] == "end_turn"


# --- OpenAI Chat Completions ------------------------------------------------------------


def test_chat_reply_to_an_offered_tool_is_a_tool_call(chat: SimUpstream) -> None:
    sent = chat_body(model="m", tools=[CHAT_SHELL, CHAT_BASH])
    response = request(chat.url, "POST", "/v1/chat/completions", sent, OPENAI_HEADERS)
    completion = ChatCompletion.model_validate(response.json())
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert choice.message.tool_calls is not None
    (call,) = choice.message.tool_calls
    assert call.type == "function"
    assert call.id.startswith("call_")
    # Both are offered; the scenario lists Bash first.
    assert (call.function.name, orjson.loads(call.function.arguments)) == ("Bash", BASH_INPUT)


def test_chat_stream_sends_argument_fragments_under_one_index(chat: SimUpstream) -> None:
    sent = chat_body(model="m", tools=[CHAT_SHELL], stream=True)
    response = request(chat.url, "POST", "/v1/chat/completions", sent, OPENAI_HEADERS)
    chunks = [
        ChatCompletionChunk.model_validate_json(event.data)
        for event in response.events()
        if event.data != b"[DONE]"
    ]
    calls = [call for chunk in chunks for call in chunk.choices[0].delta.tool_calls or ()]
    assert {call.index for call in calls} == {0}
    first = calls[0]
    assert first.id is not None
    assert first.function is not None
    assert (first.function.name, first.function.arguments) == ("shell_command", "")
    assert all(call.id is None for call in calls[1:])
    arguments = "".join(call.function.arguments or "" for call in calls if call.function)
    assert orjson.loads(arguments) == SHELL_INPUT
    assert len(calls) > 2, "the arguments arrive in several fragments"
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert response.body.endswith(b"data: [DONE]\n\n")


def test_chat_tool_message_is_quoted(chat: SimUpstream) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "Bash", "arguments": "{}"}}
    messages: list[Any] = [
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": LONG_RESULT},
    ]
    with openai_client(chat) as client:
        completion = client.chat.completions.create(
            model="m",
            messages=messages,
            tools=[CHAT_BASH],  # type: ignore[list-item]
        )
    assert completion.choices[0].message.content == QUOTE
    assert completion.choices[0].finish_reason == "stop"


def test_chat_tool_choice_none_gets_text(chat: SimUpstream) -> None:
    sent = chat_body(model="m", tools=[CHAT_BASH], tool_choice="none")
    response = request(chat.url, "POST", "/v1/chat/completions", sent, OPENAI_HEADERS)
    assert response.json()["choices"][0]["finish_reason"] == "stop"
    assert chat.replies[0].tool_call is None


# --- OpenAI Responses -------------------------------------------------------------------


def test_responses_reply_to_an_offered_tool_is_a_function_call(responses: SimUpstream) -> None:
    sent = {"model": "m", "input": "list files", "tools": [RESPONSES_SHELL]}
    response = request(responses.url, "POST", "/v1/responses", sent, OPENAI_HEADERS)
    parsed = Response.model_validate(response.json())
    (item,) = parsed.output
    assert item.type == "function_call"
    assert (item.name, orjson.loads(item.arguments)) == ("shell_command", SHELL_INPUT)
    assert item.id is not None
    assert item.id.startswith("fc_")


def test_responses_function_call_output_is_quoted(responses: SimUpstream) -> None:
    turn: list[Any] = [
        {"type": "function_call", "call_id": "c1", "name": "shell_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": LONG_RESULT},
    ]
    with openai_client(responses) as client:
        reply = client.responses.create(model="m", input=turn, tools=[RESPONSES_SHELL])  # type: ignore[list-item]
    assert reply.output_text == QUOTE


def test_a_scenario_without_tool_calls_ignores_tools(responses: SimUpstream) -> None:
    plain = Scenario.model_validate(
        {**scenario("openai").model_dump(mode="json"), "response": {"output_tokens": 3}}
    )
    with SimUpstream(plain) as sim:
        sent = chat_body(model="m", tools=[CHAT_BASH])
        response = request(sim.url, "POST", "/v1/chat/completions", sent, OPENAI_HEADERS)
    message = response.json()["choices"][0]["message"]
    assert message["content"] == "The simulated upstream"
    assert "tool_calls" not in message
