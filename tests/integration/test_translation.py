"""Any client, any upstream: requests translated between APIs through the real gateway.

The session's upstreams are a Claude plan and an Anthropic API key (Messages) and two
OpenAI-compatible providers (Chat Completions). Each official SDK, in each mode, reaches
an upstream of the other API, and what comes back parses with the SDK's own types.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from rungway.sim import HttpErrorFault, QuotaExhaustedFault, SimUpstream, StreamErrorFault
from tests.integration.conftest import (
    CLAUDE,
    CLAUDE_CODE_HEADERS,
    DEEPSEEK,
    StartGateway,
    Upstreams,
    with_a_widened_plan,
)

HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]
SYSTEM = "You are terse."


Clients = tuple[Any, anthropic.Anthropic, openai.OpenAI]


@pytest.fixture
def clients(start_gateway: StartGateway) -> Iterator[Clients]:
    gateway = start_gateway()
    with (
        anthropic.Anthropic(base_url=gateway.url, api_key="unused", max_retries=0) as claude,
        openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0) as gpt,
    ):
        yield gateway, claude, gpt


def test_an_anthropic_client_is_served_by_a_chat_upstream(
    clients: Clients, sims: Upstreams
) -> None:
    gateway, claude, _ = clients
    raw = claude.messages.with_raw_response.create(
        model=DEEPSEEK, max_tokens=64, system=SYSTEM, messages=HELLO
    )
    message = raw.parse()
    assert raw.headers["x-rungway-connection"] == "cheap"
    assert message.type == "message"
    assert message.id.startswith("msg_")
    assert message.stop_reason == "end_turn"
    text = "".join(block.text for block in message.content if block.type == "text")
    assert len(text.split()) == 24
    sent = sims.cheap.requests[-1]
    assert sent.path == "/v1/chat/completions"
    assert sent.body["messages"][0] == {"role": "system", "content": SYSTEM}
    assert sent.body["messages"][1]["role"] == "user"
    (row,) = gateway.rows()
    assert (row["connection_id"], row["output_tokens"]) == ("cheap", 24)
    assert message.usage.output_tokens == 24
    assert message.usage.input_tokens == row["input_tokens"]


def test_an_anthropic_stream_from_a_chat_upstream_is_one_well_formed_stream(
    clients: Clients, sims: Upstreams
) -> None:
    gateway, claude, _ = clients
    with claude.messages.stream(model=DEEPSEEK, max_tokens=64, messages=HELLO) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start"
    assert kinds[-1] == "message_stop"
    assert kinds.count("message_delta") == 1
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 24
    # The gateway asked the Chat upstream for the usage chunk it turns into message_delta.
    assert sims.cheap.requests[-1].body["stream_options"] == {"include_usage": True}
    (row,) = gateway.rows()
    assert (row["outcome"], row["output_tokens"]) == ("ok", 24)


def test_an_openai_client_is_served_by_a_messages_upstream(
    start_gateway: StartGateway, sims: Upstreams, any_client_plan: SimUpstream, tmp_path: Path
) -> None:
    # The Claude plan serves Claude Code only, and an OpenAI client is not Claude Code: this
    # test is about the translation to Messages, so the plan's connection is widened on
    # purpose (`clients: any`) in front of a plan that does not check its client.
    gateway = start_gateway(connections=with_a_widened_plan(sims, any_client_plan, tmp_path))
    with openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0) as gpt:
        completion = gpt.chat.completions.create(
            model=CLAUDE,
            messages=[{"role": "system", "content": SYSTEM}, *HELLO],
            max_tokens=64,
        )
    assert completion.object == "chat.completion"
    assert completion.created > 1_700_000_000, "stamped by the gateway"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.choices[0].message.content
    assert completion.usage is not None
    assert completion.usage.completion_tokens == 24
    sent = any_client_plan.requests[-1]
    assert sent.path == "/v1/messages"
    assert sent.body["system"] in (SYSTEM, [{"type": "text", "text": SYSTEM}])
    assert sent.body["max_tokens"] == 64
    (row,) = gateway.rows()
    assert row["connection_id"] == "plan"


def test_an_openai_stream_from_a_messages_upstream_reports_usage_only_when_asked(
    clients: Clients,
) -> None:
    _, _, gpt = clients
    plain = list(gpt.chat.completions.create(model=CLAUDE, messages=HELLO, stream=True))
    assert all(chunk.choices for chunk in plain)
    assert plain[-1].choices[0].finish_reason == "stop"
    counted = list(
        gpt.chat.completions.create(
            model=CLAUDE, messages=HELLO, stream=True, stream_options={"include_usage": True}
        )
    )
    assert counted[-1].choices == []
    assert counted[-1].usage is not None
    assert counted[-1].usage.completion_tokens == 24
    text = "".join(c.choices[0].delta.content or "" for c in counted if c.choices)
    assert len(text.split()) == 24


@pytest.mark.parametrize("model", [CLAUDE, DEEPSEEK])
def test_a_responses_client_is_served_by_either_api(clients: Clients, model: str) -> None:
    _, _, gpt = clients
    response = gpt.responses.create(model=model, instructions=SYSTEM, input="Say hello.")
    assert response.status == "completed"
    assert len(response.output_text.split()) == 24
    assert response.usage is not None
    assert response.usage.output_tokens == 24
    with gpt.responses.stream(model=model, input="Say hello.") as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created"
    assert kinds[-1] == "response.completed"
    assert len(final.output_text.split()) == 24


def test_thrifty_carries_an_anthropic_client_to_the_cheap_chat_rung_when_the_plan_is_spent(
    clients: Clients, sims: Upstreams
) -> None:
    gateway, claude, _ = clients
    sims.subscription.push_fault(QuotaExhaustedFault(window="5h"))
    # Claude Code, the one client the plan serves: with the plan spent, it goes a rung up.
    claude_code = claude.with_options(default_headers=CLAUDE_CODE_HEADERS)
    with claude_code.messages.stream(model="auto/thrifty", max_tokens=64, messages=HELLO) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "end_turn"
    (row,) = gateway.rows()
    assert (row["connection_id"], row["rung"]) == ("cheap", "cheap")
    assert [attempt["outcome"] for attempt in row["attempts"]] == ["quota_exhausted"]


def test_an_overload_inside_a_translated_stream_before_content_moves_to_the_next_connection(
    clients: Clients, sims: Upstreams
) -> None:
    gateway, claude, _ = clients
    sims.cheap.push_fault(StreamErrorFault(after_events=0, error_type="server_is_overloaded"))
    with claude.messages.stream(model=DEEPSEEK, max_tokens=64, messages=HELLO) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds.count("message_start") == 1
    assert kinds[-1] == "message_stop"
    assert final.usage.output_tokens == 24
    (row,) = gateway.rows()
    assert row["connection_id"] == "backup"
    assert [attempt["connection_id"] for attempt in row["attempts"]] == ["cheap"]


def test_an_upstream_rejection_reaches_the_client_in_its_own_shape(
    clients: Clients, sims: Upstreams
) -> None:
    _, claude, _ = clients
    sims.cheap.push_fault(HttpErrorFault(status=400, message="messages: bad role"))
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(model=DEEPSEEK, max_tokens=64, messages=HELLO)
    body = caught.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert "bad role" in body["error"]["message"]


def test_a_request_for_more_output_than_the_model_allows_is_retried_within_its_limit(
    clients: Clients, sims: Upstreams
) -> None:
    gateway, claude, gpt = clients
    # Claude Code asks for 32,000 output tokens; the cheap rung's model allows 8,192.
    with claude.messages.stream(model=DEEPSEEK, max_tokens=32000, messages=HELLO) as stream:
        assert stream.get_final_message().stop_reason == "end_turn"
    asked = [request.body["max_tokens"] for request in sims.cheap.requests]
    assert asked == [32000, 8192]
    completion = gpt.chat.completions.create(model=DEEPSEEK, max_tokens=20000, messages=HELLO)
    assert completion.choices[0].finish_reason == "stop"
    assert [request.body["max_tokens"] for request in sims.cheap.requests][2:] == [20000, 8192]
    rows = gateway.rows()
    assert [row["outcome"] for row in rows] == ["ok", "ok"]
