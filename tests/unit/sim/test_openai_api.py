"""The simulated OpenAI Chat Completions API: SDK round trips, chunk framing, errors."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from rungway.sim import SimUpstream

from .conftest import OPENAI_KEY, chat_body, request

AUTH = {"authorization": f"Bearer {OPENAI_KEY}", "content-type": "application/json"}
TEXT_10 = "The simulated upstream answers with a fixed and predictable reply"


def make_client(sim: SimUpstream, key: str = OPENAI_KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{sim.url}/v1", api_key=key, max_retries=0)


@pytest.fixture
def client(openai_sim: SimUpstream) -> Iterator[openai.OpenAI]:
    with make_client(openai_sim) as sdk:
        yield sdk


def test_sdk_completion_round_trip_has_full_usage(
    client: openai.OpenAI, openai_sim: SimUpstream
) -> None:
    completion = client.chat.completions.create(
        model="gpt-4.1-mini", messages=[{"role": "user", "content": "Hello there"}]
    )
    assert completion.id.startswith("chatcmpl-")
    assert completion.object == "chat.completion"
    assert completion.created == int(openai_sim.fake_clock.now())
    assert completion.choices[0].message.content == TEXT_10
    assert completion.choices[0].finish_reason == "stop"
    usage = completion.usage
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (13, 10, 23)
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == 0
    assert usage.completion_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens == 0
    tally = openai_sim.tally.by_model()["gpt-4.1-mini"]
    assert (tally.requests, tally.input_tokens, tally.output_tokens) == (1, 13, 10)


def test_sdk_stream_with_include_usage_ends_with_a_usage_chunk(
    client: openai.OpenAI, openai_sim: SimUpstream
) -> None:
    chunks = list(
        client.chat.completions.create(
            model="gpt-4.1-mini",
            messages=[{"role": "user", "content": "Hello there"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[0].choices[0].delta.content == ""
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert text == TEXT_10
    assert all(chunk.usage is None for chunk in chunks[:-1])
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 10
    assert chunks[-1].usage.prompt_tokens == 13


def test_raw_stream_framing_with_and_without_include_usage(openai_sim: SimUpstream) -> None:
    plain = request(openai_sim.url, "POST", "/v1/chat/completions", chat_body(stream=True), AUTH)
    with_usage = request(
        openai_sim.url,
        "POST",
        "/v1/chat/completions",
        chat_body(stream=True, stream_options={"include_usage": True}),
        AUTH,
    )
    for response in (plain, with_usage):
        assert response.status == 200
        assert (response.header("content-type") or "").startswith("text/event-stream")
        assert (response.header("x-request-id") or "").startswith("req_")
        assert b"event:" not in response.body
        assert response.body.endswith(b"\n\ndata: [DONE]\n\n")
    plain_chunks = [event.json() for event in plain.events()[:-1]]
    usage_chunks = [event.json() for event in with_usage.events()[:-1]]
    # role chunk + 4 text chunks (10 tokens by 3) + finish chunk
    assert len(plain_chunks) == 6
    assert len(usage_chunks) == 7
    for chunk in plain_chunks:
        assert isinstance(chunk, dict)
        assert "usage" not in chunk
        assert chunk["object"] == "chat.completion.chunk"
    for chunk in usage_chunks:
        assert isinstance(chunk, dict)
        assert "usage" in chunk
    role = plain_chunks[0]
    assert isinstance(role, dict)
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    finish = plain_chunks[-1]
    assert isinstance(finish, dict)
    assert finish["choices"] == [
        {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
    ]
    trailer = usage_chunks[-1]
    assert isinstance(trailer, dict)
    assert trailer["choices"] == []
    assert trailer["usage"]["total_tokens"] == 23


def test_max_completion_tokens_truncates_with_finish_reason_length(
    client: openai.OpenAI,
    openai_sim: SimUpstream,
) -> None:
    completion = client.chat.completions.create(
        model="gpt-4.1-mini",
        messages=[{"role": "user", "content": "Hello there"}],
        max_completion_tokens=3,
    )
    assert completion.choices[0].finish_reason == "length"
    assert completion.choices[0].message.content == "The simulated upstream"
    assert completion.usage is not None
    assert completion.usage.completion_tokens == 3


def test_wrong_key_is_invalid_api_key(openai_sim: SimUpstream) -> None:
    with (
        make_client(openai_sim, key="sk-test-wrong-key-123456") as wrong,
        pytest.raises(openai.AuthenticationError) as caught,
    ):
        wrong.chat.completions.create(
            model="gpt-4.1-mini", messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.code == "invalid_api_key"
    assert caught.value.type == "invalid_request_error"
    assert "sk-test-" in caught.value.message
    assert "wrong-key" not in caught.value.message  # the key is masked


def test_missing_key_is_401(openai_sim: SimUpstream) -> None:
    response = request(openai_sim.url, "POST", "/v1/chat/completions", chat_body(), {})
    assert response.status == 401
    error = response.json()["error"]
    assert error["code"] == "invalid_api_key"
    assert error["message"].startswith("You didn't provide an API key.")


def test_unknown_model_is_model_not_found(client: openai.OpenAI, openai_sim: SimUpstream) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "x"}])
    assert caught.value.code == "model_not_found"
    assert "The model `gpt-9` does not exist" in caught.value.message


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        ({"model": "gpt-4.1-mini"}, "missing_required_parameter", "messages"),
        (chat_body(max_tokens=501), "invalid_value", "max_tokens"),
        (chat_body(max_completion_tokens=0), "integer_below_min_value", "max_completion_tokens"),
    ],
)
def test_invalid_requests_get_invalid_request_error(
    openai_sim: SimUpstream, body: dict[str, object], code: str, param: str
) -> None:
    response = request(openai_sim.url, "POST", "/v1/chat/completions", body, AUTH)
    assert response.status == 400
    error = response.json()["error"]
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", code, param)


def test_models_list_has_the_openai_shape(client: openai.OpenAI, openai_sim: SimUpstream) -> None:
    models = list(client.models.list())
    assert [model.id for model in models] == ["gpt-4.1-mini", "deepseek-chat"]
    assert all(model.object == "model" for model in models)
    assert client.models.retrieve("deepseek-chat").id == "deepseek-chat"


def test_unknown_route_names_the_url(openai_sim: SimUpstream) -> None:
    response = request(openai_sim.url, "POST", "/v1/completions", {}, AUTH)
    assert response.status == 404
    assert response.json()["error"]["message"] == "Invalid URL (POST /v1/completions)"
