"""The official anthropic SDK talks to the gateway unchanged, streaming and not."""

from __future__ import annotations

import anthropic
import httpx

from tests.integration.conftest import (
    CLAUDE,
    CLAUDE_CODE_HEADERS,
    SUBSCRIPTION_TOKEN,
    StartGateway,
    Upstreams,
)


def _client(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=url,
        api_key="client-key-not-for-upstreams",
        max_retries=0,
        default_headers=CLAUDE_CODE_HEADERS,
    )


def test_message_goes_to_the_plan_with_the_plans_own_credential(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    raw = _client(gateway.url).messages.with_raw_response.create(
        model=CLAUDE,
        max_tokens=64,
        messages=[{"role": "user", "content": "Say hello."}],
        extra_headers={"anthropic-beta": "claude-code-20250219", "x-app": "cli"},
    )
    message = raw.parse()
    assert message.content[0].type == "text"
    assert message.usage.output_tokens == 24
    assert raw.headers["x-rungway-connection"] == "plan"

    received = sims.subscription.requests[-1]
    assert received.header("authorization") == f"Bearer {SUBSCRIPTION_TOKEN}"
    assert received.header("x-api-key") is None
    assert received.header("anthropic-beta") == "claude-code-20250219,oauth-2025-04-20"
    assert received.header("x-app") == "cli"
    assert received.header("user-agent") == CLAUDE_CODE_HEADERS["user-agent"]

    (row,) = gateway.rows()
    assert row["connection_id"] == "plan"
    assert row["input_tokens"] == message.usage.input_tokens
    assert row["output_tokens"] == 24


def test_stream_with_beta_query_as_claude_code_sends_it(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    with _client(gateway.url).messages.stream(
        model="claude-sonnet-4-5-20250929",
        max_tokens=64,
        messages=[{"role": "user", "content": "Say hello."}],
        extra_query={"beta": "true"},
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert len(text.split()) == 24
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 24
    received = sims.subscription.requests[-1]
    assert received.query == "beta=true"
    assert received.body["model"] == CLAUDE
    (row,) = gateway.rows()
    assert row["requested_model"] == "claude-sonnet-4-5-20250929"
    assert row["resolved_model"] == CLAUDE
    assert (row["output_tokens"], row["stream"]) == (24, 1)


def test_count_tokens_is_answered_by_the_upstream(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    count = _client(gateway.url).messages.count_tokens(
        model=CLAUDE, messages=[{"role": "user", "content": "How many tokens is this?"}]
    )
    assert count.input_tokens > 0
    assert sims.subscription.requests[-1].path == "/v1/messages/count_tokens"
    assert gateway.rows() == []


def test_count_tokens_is_estimated_for_a_model_without_the_endpoint(
    start_gateway: StartGateway,
) -> None:
    gateway = start_gateway()
    count = _client(gateway.url).messages.count_tokens(
        model="deepseek-chat", messages=[{"role": "user", "content": "x" * 400}]
    )
    assert 100 <= count.input_tokens <= 140


def test_models_are_listed_in_anthropic_shape(start_gateway: StartGateway) -> None:
    gateway = start_gateway()
    page = _client(gateway.url).models.list()
    assert CLAUDE in [model.id for model in page.data]
    response = httpx.get(f"{gateway.url}/v1/models", headers={"anthropic-version": "2023-06-01"})
    assert set(response.json()) == {"data", "has_more", "first_id", "last_id"}
