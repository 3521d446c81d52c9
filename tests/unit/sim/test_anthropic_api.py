"""The simulated Anthropic Messages API: SDK round trips, exact stream framing, errors."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import pytest

from rungway.sim import SimUpstream

from .conftest import (
    ANTHROPIC_HEADERS,
    API_KEY,
    CLAUDE_CODE_HEADERS,
    SUBSCRIPTION_TOKEN,
    message_body,
    request,
)

EXPECTED_TEXT = (
    "The simulated upstream answers with a fixed and predictable reply so that tests, "
    "demos and benchmarks can count every token it sends back to"
)


def make_client(sim: SimUpstream, token: str = SUBSCRIPTION_TOKEN) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=sim.url,
        auth_token=token,
        max_retries=0,
        default_headers=CLAUDE_CODE_HEADERS,
    )


@pytest.fixture
def client(subscription_sim: SimUpstream) -> Iterator[anthropic.Anthropic]:
    with make_client(subscription_sim) as sdk:
        yield sdk


def test_sdk_message_round_trip_reports_text_and_usage(
    client: anthropic.Anthropic, subscription_sim: SimUpstream
) -> None:
    message = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        messages=[{"role": "user", "content": "Hello there"}],
    )
    assert message.id.startswith("msg_")
    assert message.content[0].type == "text"
    assert message.content[0].text == EXPECTED_TEXT
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens == 24
    assert message.usage.input_tokens == 13
    assert message.usage.cache_read_input_tokens == 0
    assert message.usage.cache_creation_input_tokens == 0
    tally = subscription_sim.tally.by_model()["claude-sonnet-4-5"]
    assert (tally.requests, tally.input_tokens, tally.output_tokens) == (1, 13, 24)


def test_sdk_stream_accumulates_the_same_message(
    client: anthropic.Anthropic, subscription_sim: SimUpstream
) -> None:
    with client.messages.stream(
        model="claude-sonnet-4-5",
        max_tokens=256,
        messages=[{"role": "user", "content": "Hello there"}],
    ) as stream:
        deltas = list(stream.text_stream)
        final = stream.get_final_message()
    assert len(deltas) == 6  # 24 tokens in chunks of 4
    assert "".join(deltas) == EXPECTED_TEXT
    assert final.usage.output_tokens == 24
    assert final.usage.input_tokens == 13
    assert final.stop_reason == "end_turn"


def test_max_tokens_truncates_and_reports_max_tokens(
    client: anthropic.Anthropic, subscription_sim: SimUpstream
) -> None:
    message = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=5,
        messages=[{"role": "user", "content": "Hello there"}],
    )
    assert message.stop_reason == "max_tokens"
    assert message.usage.output_tokens == 5
    assert message.content[0].type == "text"
    assert message.content[0].text == "The simulated upstream answers with"


def test_stream_frames_come_in_the_documented_order(subscription_sim: SimUpstream) -> None:
    response = request(
        subscription_sim.url,
        "POST",
        "/v1/messages?beta=true",
        message_body(stream=True),
        ANTHROPIC_HEADERS,
    )
    assert response.status == 200
    assert (response.header("content-type") or "").startswith("text/event-stream")
    assert (response.header("request-id") or "").startswith("req_")
    events = response.events()
    names = [event.event for event in events]
    assert names == [
        "message_start",
        "content_block_start",
        "ping",
        *["content_block_delta"] * 6,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    payloads = [event.json() for event in events]
    for name, payload in zip(names, payloads, strict=True):
        assert isinstance(payload, dict)
        assert payload["type"] == name
    start = payloads[0]
    assert isinstance(start, dict)
    assert start["message"]["usage"]["output_tokens"] == 1
    assert start["message"]["usage"]["input_tokens"] == 13
    assert start["message"]["content"] == []
    delta = payloads[-2]
    assert isinstance(delta, dict)
    assert delta["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert delta["usage"]["output_tokens"] == 24
    assert response.body.endswith(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')


def test_requests_are_recorded_with_query_headers_and_body(subscription_sim: SimUpstream) -> None:
    request(
        subscription_sim.url, "POST", "/v1/messages?beta=true", message_body(), ANTHROPIC_HEADERS
    )
    (recorded,) = subscription_sim.requests
    assert recorded.method == "POST"
    assert recorded.path == "/v1/messages"
    assert recorded.query == "beta=true"
    assert recorded.header("Anthropic-Beta") == "claude-code-20250219,oauth-2025-04-20"
    assert recorded.body == message_body()


def test_count_tokens_matches_billed_input(
    client: anthropic.Anthropic, subscription_sim: SimUpstream
) -> None:
    counted = client.messages.count_tokens(
        model="claude-sonnet-4-5", messages=[{"role": "user", "content": "Hello there"}]
    )
    assert counted.input_tokens == 13


def test_models_list_has_the_anthropic_shape(
    client: anthropic.Anthropic, subscription_sim: SimUpstream
) -> None:
    response = request(subscription_sim.url, "GET", "/v1/models?limit=1", None, ANTHROPIC_HEADERS)
    assert response.status == 200
    assert response.json() == {
        "data": [
            {
                "type": "model",
                "id": "claude-sonnet-4-5",
                "display_name": "Claude Sonnet 4.5",
                "created_at": "2025-09-29T00:00:00Z",
            }
        ],
        "has_more": True,
        "first_id": "claude-sonnet-4-5",
        "last_id": "claude-sonnet-4-5",
    }
    ids = [model.id for model in client.models.list()]
    assert ids == ["claude-sonnet-4-5", "claude-fable-5"]


def test_bearer_without_oauth_beta_is_refused(subscription_sim: SimUpstream) -> None:
    headers = {k: v for k, v in ANTHROPIC_HEADERS.items() if k != "anthropic-beta"}
    response = request(subscription_sim.url, "POST", "/v1/messages", message_body(), headers)
    assert response.status == 401
    body = response.json()
    assert body["type"] == "error"
    assert body["error"] == {
        "type": "authentication_error",
        "message": "OAuth authentication is currently not supported.",
    }
    assert body["request_id"].startswith("req_")


def test_wrong_plan_token_gets_authentication_error(subscription_sim: SimUpstream) -> None:
    with (
        make_client(subscription_sim, token="sk-ant-oat01-wrong") as wrong,
        pytest.raises(anthropic.AuthenticationError) as caught,
    ):
        wrong.messages.create(
            model="claude-sonnet-4-5", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.status_code == 401
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["error"]["type"] == "authentication_error"


def test_api_key_upstream_checks_x_api_key(apikey_sim: SimUpstream) -> None:
    headers = {"anthropic-version": "2023-06-01"}
    missing = request(apikey_sim.url, "POST", "/v1/messages", message_body(), headers)
    wrong = request(
        apikey_sim.url, "POST", "/v1/messages", message_body(), {**headers, "x-api-key": "nope"}
    )
    right = request(
        apikey_sim.url, "POST", "/v1/messages", message_body(), {**headers, "x-api-key": API_KEY}
    )
    assert missing.status == 401
    assert missing.json()["error"]["message"] == "x-api-key header is required"
    assert wrong.status == 401
    assert wrong.json()["error"] == {"type": "authentication_error", "message": "invalid x-api-key"}
    assert right.status == 200
    assert right.json()["content"][0]["text"] == "Hello from the metered key."


def test_unknown_model_is_not_found_error(
    client: anthropic.Anthropic, subscription_sim: SimUpstream
) -> None:
    with pytest.raises(anthropic.NotFoundError) as caught:
        client.messages.create(
            model="claude-nonexistent", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["error"] == {
        "type": "not_found_error",
        "message": "model: claude-nonexistent",
    }


@pytest.mark.parametrize(
    ("drop_header", "body", "message"),
    [
        ("anthropic-version", message_body(), "anthropic-version: header is required"),
        (None, {"model": "claude-sonnet-4-5", "messages": []}, "max_tokens: Field required"),
        (
            None,
            message_body(max_tokens=0),
            "max_tokens: Input should be greater than or equal to 1",
        ),
        (
            None,
            message_body(model="claude-fable-5", max_tokens=1001),
            "max_tokens: 1001 > 1000, which is the maximum allowed number of output tokens "
            "for claude-fable-5",
        ),
        (
            None,
            message_body(model="claude-fable-5", system="x" * 400),
            "prompt is too long: 116 tokens > 50 maximum",
        ),
    ],
)
def test_invalid_requests_get_invalid_request_error(
    subscription_sim: SimUpstream, drop_header: str | None, body: dict[str, object], message: str
) -> None:
    headers = {k: v for k, v in ANTHROPIC_HEADERS.items() if k != drop_header}
    response = request(subscription_sim.url, "POST", "/v1/messages", body, headers)
    assert response.status == 400
    assert response.json()["error"] == {"type": "invalid_request_error", "message": message}
    assert subscription_sim.tally.by_model() == {}


def test_unknown_route_is_provider_shaped_404(subscription_sim: SimUpstream) -> None:
    response = request(subscription_sim.url, "POST", "/v1/complete", {}, ANTHROPIC_HEADERS)
    assert response.status == 404
    assert response.json()["error"]["type"] == "not_found_error"
