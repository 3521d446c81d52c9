"""The official openai SDK talks to the gateway unchanged, streaming and not."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import openai
import pytest

from tests.integration.conftest import DEEPSEEK, StartGateway, Upstreams

MESSAGES: list[openai.types.chat.ChatCompletionMessageParam] = [
    {"role": "user", "content": "Say hello."}
]


ClientFor = Callable[[str], openai.OpenAI]


@pytest.fixture
def client_for() -> Iterator[ClientFor]:
    """SDK clients for a gateway URL, closed when the test ends."""
    clients: list[openai.OpenAI] = []

    def make(url: str) -> openai.OpenAI:
        client = openai.OpenAI(
            base_url=f"{url}/v1", api_key="unused-without-client-keys", max_retries=0
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def test_completion_passes_through_and_is_recorded(
    client_for: ClientFor, start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    raw = client_for(gateway.url).chat.completions.with_raw_response.create(
        model=DEEPSEEK, messages=MESSAGES, extra_body={"x_vendor_knob": {"depth": 2}}
    )
    completion = raw.parse()
    assert completion.choices[0].message.content
    assert completion.usage is not None
    assert raw.headers["x-rungway-connection"] == "cheap"
    request_id = raw.headers["x-rungway-request-id"]

    received = sims.cheap.requests[-1]
    assert received.body["x_vendor_knob"] == {"depth": 2}
    assert received.header("authorization") == "Bearer sk-integration-cheap"

    (row,) = gateway.rows()
    assert row["request_id"] == request_id
    assert (row["connection_id"], row["provider"], row["outcome"]) == ("cheap", "deepseek", "ok")
    assert row["requested_model"] == DEEPSEEK
    assert row["input_tokens"] == completion.usage.prompt_tokens
    assert row["output_tokens"] == completion.usage.completion_tokens
    assert row["latency_ms"] > 0
    assert row["ttfb_ms"] is not None
    assert row["ttfb_ms"] <= row["latency_ms"]


def test_stream_arrives_whole_and_hides_the_usage_chunk_it_did_not_ask_for(
    client_for: ClientFor, start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    chunks = list(
        client_for(gateway.url).chat.completions.create(
            model=DEEPSEEK, messages=MESSAGES, stream=True
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(text.split()) == 24
    assert all(chunk.choices for chunk in chunks), "the injected usage chunk leaked"
    assert chunks[-1].choices[0].finish_reason == "stop"
    # The gateway asked the upstream for usage so that the ledger has the tokens.
    assert sims.cheap.requests[-1].body["stream_options"] == {"include_usage": True}
    (row,) = gateway.rows()
    assert row["stream"] == 1
    assert row["output_tokens"] == 24
    assert row["input_tokens"] > 0


def test_stream_that_asks_for_usage_gets_it(
    client_for: ClientFor, start_gateway: StartGateway
) -> None:
    gateway = start_gateway()
    chunks = list(
        client_for(gateway.url).chat.completions.create(
            model=DEEPSEEK,
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 24
    (row,) = gateway.rows()
    assert row["output_tokens"] == 24


def test_alias_and_connection_prefix_route_as_configured(
    client_for: ClientFor, start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    client = client_for(gateway.url)
    via_alias = client.chat.completions.with_raw_response.create(model="fast", messages=MESSAGES)
    assert via_alias.headers["x-rungway-connection"] == "cheap"
    pinned = client.chat.completions.with_raw_response.create(
        model=f"backup/{DEEPSEEK}", messages=MESSAGES
    )
    assert pinned.headers["x-rungway-connection"] == "backup"
    # The upstream sees its own model name, not the gateway's prefix.
    assert sims.backup.requests[-1].body["model"] == DEEPSEEK
    rows = {row["connection_id"]: row for row in gateway.rows()}
    assert rows["cheap"]["requested_model"] == "fast"
    assert rows["cheap"]["resolved_model"] == DEEPSEEK


def test_models_are_listed_in_openai_shape(
    client_for: ClientFor, start_gateway: StartGateway
) -> None:
    gateway = start_gateway()
    ids = [model.id for model in client_for(gateway.url).models.list()]
    assert DEEPSEEK in ids
    assert "claude-sonnet-4-5" in ids
    assert "fast" in ids
