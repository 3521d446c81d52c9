"""Every fault kind as clients see it, on both wire APIs."""

from __future__ import annotations

import asyncio
import http.client
import time
from collections.abc import Iterator

import aiohttp
import anthropic
import openai
import orjson
import pytest

from rungway.protocol.sse import SseSplitter
from rungway.sim import (
    DisconnectFault,
    GarbageFault,
    HttpErrorFault,
    SimUpstream,
    StreamErrorFault,
    TimeoutFault,
)

from .conftest import (
    ANTHROPIC_HEADERS,
    CLAUDE_CODE_HEADERS,
    OPENAI_KEY,
    SUBSCRIPTION_TOKEN,
    chat_body,
    connect,
    message_body,
    request,
)

OPENAI_AUTH = {"authorization": f"Bearer {OPENAI_KEY}"}


@pytest.fixture
def claude(subscription_sim: SimUpstream) -> Iterator[anthropic.Anthropic]:
    client = anthropic.Anthropic(
        base_url=subscription_sim.url,
        auth_token=SUBSCRIPTION_TOKEN,
        max_retries=0,
        default_headers=CLAUDE_CODE_HEADERS,
    )
    with client:
        yield client


@pytest.fixture
def gpt(openai_sim: SimUpstream) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{openai_sim.url}/v1", api_key=OPENAI_KEY, max_retries=0) as c:
        yield c


def read_partial(url: str, path: str, body: object, headers: dict[str, str]) -> bytes:
    """POST and read until the server drops the connection; return what arrived."""
    connection = connect(url)
    try:
        connection.request("POST", path, body=orjson.dumps(body), headers=headers)
        response = connection.getresponse()
        assert response.status == 200
        with pytest.raises(http.client.IncompleteRead) as caught:
            response.read()
        return caught.value.partial
    finally:
        connection.close()


# --- http_error ---------------------------------------------------------------------------


def test_anthropic_529_is_overloaded_error_without_quota_headers(
    subscription_sim: SimUpstream,
) -> None:
    subscription_sim.push_fault(HttpErrorFault(status=529, retry_after_s=2.5))
    response = request(
        subscription_sim.url, "POST", "/v1/messages", message_body(), ANTHROPIC_HEADERS
    )
    assert response.status == 529
    body = response.json()
    assert body["type"] == "error"
    assert body["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    assert response.header("retry-after") == "3"
    assert not any(name.lower().startswith("anthropic-ratelimit") for name, _ in response.headers)
    follow_up = request(
        subscription_sim.url, "POST", "/v1/messages", message_body(), ANTHROPIC_HEADERS
    )
    assert follow_up.status == 200


def test_non_quota_429_has_no_unified_headers_unless_asked(subscription_sim: SimUpstream) -> None:
    subscription_sim.push_fault(HttpErrorFault(status=429))
    subscription_sim.push_fault(HttpErrorFault(status=429, quota_headers=True))
    bare = request(subscription_sim.url, "POST", "/v1/messages", message_body(), ANTHROPIC_HEADERS)
    with_headers = request(
        subscription_sim.url, "POST", "/v1/messages", message_body(), ANTHROPIC_HEADERS
    )
    assert bare.status == with_headers.status == 429
    assert bare.json()["error"]["type"] == "rate_limit_error"
    assert bare.header("anthropic-ratelimit-unified-status") is None
    assert with_headers.header("anthropic-ratelimit-unified-status") == "allowed"


def test_model_scoped_fault_fires_only_for_its_model(
    subscription_sim: SimUpstream, claude: anthropic.Anthropic
) -> None:
    subscription_sim.push_fault(HttpErrorFault(status=500, model="claude-fable-5", times=2))
    ok = claude.messages.create(
        model="claude-sonnet-4-5", max_tokens=10, messages=[{"role": "user", "content": "x"}]
    )
    assert ok.stop_reason == "max_tokens"
    for _ in range(2):
        with pytest.raises(anthropic.InternalServerError) as caught:
            claude.messages.create(
                model="claude-fable-5", max_tokens=10, messages=[{"role": "user", "content": "x"}]
            )
        assert isinstance(caught.value.body, dict)
        assert caught.value.body["error"]["type"] == "api_error"
    assert subscription_sim.state().faults == []


def test_openai_529_becomes_503_server_error(openai_sim: SimUpstream, gpt: openai.OpenAI) -> None:
    openai_sim.push_fault(HttpErrorFault(status=529))
    with pytest.raises(openai.InternalServerError) as caught:
        gpt.chat.completions.create(
            model="gpt-4.1-mini", messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.status_code == 503
    assert caught.value.type == "server_error"


def test_openai_insufficient_quota_429(openai_sim: SimUpstream, gpt: openai.OpenAI) -> None:
    openai_sim.push_fault(HttpErrorFault(status=429, error_type="insufficient_quota"))
    with pytest.raises(openai.RateLimitError) as caught:
        gpt.chat.completions.create(
            model="gpt-4.1-mini", messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.type == "insufficient_quota"
    assert caught.value.code == "insufficient_quota"
    assert "You exceeded your current quota" in caught.value.message


# --- timeout ------------------------------------------------------------------------------


def test_timeout_fault_outlasts_an_impatient_client(
    subscription_sim: SimUpstream, claude: anthropic.Anthropic
) -> None:
    subscription_sim.push_fault(TimeoutFault(delay_s=1.0))
    with pytest.raises(anthropic.APITimeoutError):
        claude.with_options(timeout=0.2).messages.create(
            model="claude-sonnet-4-5", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    assert subscription_sim.tally.by_model() == {}


def test_timeout_fault_delays_then_answers_a_patient_client(openai_sim: SimUpstream) -> None:
    openai_sim.push_fault(TimeoutFault(delay_s=0.3))
    started = time.monotonic()
    response = request(openai_sim.url, "POST", "/v1/chat/completions", chat_body(), OPENAI_AUTH)
    assert time.monotonic() - started >= 0.3
    assert response.status == 200
    assert openai_sim.tally.by_model()["gpt-4.1-mini"].requests == 1


# --- disconnect ---------------------------------------------------------------------------


def test_disconnect_before_responding_drops_the_connection(subscription_sim: SimUpstream) -> None:
    subscription_sim.push_fault(DisconnectFault())
    connection = connect(subscription_sim.url)
    try:
        connection.request(
            "POST", "/v1/messages", body=orjson.dumps(message_body()), headers=ANTHROPIC_HEADERS
        )
        with pytest.raises(http.client.RemoteDisconnected):
            connection.getresponse()
    finally:
        connection.close()
    assert subscription_sim.tally.by_model() == {}
    assert subscription_sim.state().window("5h").used == 0


def test_disconnect_mid_stream_leaves_whole_events_and_no_terminator(
    subscription_sim: SimUpstream,
) -> None:
    subscription_sim.push_fault(DisconnectFault(after_events=4))
    partial = read_partial(
        subscription_sim.url, "/v1/messages", message_body(stream=True), ANTHROPIC_HEADERS
    )
    splitter = SseSplitter()
    events = splitter.feed(partial)
    assert [event.event for event in events] == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
    ]
    assert splitter.pending == b""
    assert subscription_sim.tally.by_model() == {}


def test_disconnect_mid_stream_surfaces_as_a_connection_error_in_the_sdk(
    openai_sim: SimUpstream, gpt: openai.OpenAI
) -> None:
    openai_sim.push_fault(DisconnectFault(after_events=2))
    stream = gpt.chat.completions.create(
        model="gpt-4.1-mini", messages=[{"role": "user", "content": "x"}], stream=True
    )
    received: list[object] = []
    with pytest.raises(openai.APIConnectionError):
        received.extend(stream)
    assert len(received) == 2


def test_disconnect_mid_stream_seen_by_aiohttp(openai_sim: SimUpstream) -> None:
    openai_sim.push_fault(DisconnectFault(after_events=3))

    async def fetch() -> tuple[bytes, BaseException | None]:
        received = b""
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{openai_sim.url}/v1/chat/completions",
                json=chat_body(stream=True),
                headers=OPENAI_AUTH,
            ) as response,
        ):
            assert response.status == 200
            try:
                async for chunk in response.content.iter_any():
                    received += chunk
            except aiohttp.ClientPayloadError as exc:
                return received, exc
        return received, None

    received, error = asyncio.run(fetch())
    assert isinstance(error, aiohttp.ClientPayloadError)
    assert len(SseSplitter().feed(received)) == 3
    assert b"[DONE]" not in received


# --- stream_error -------------------------------------------------------------------------


def test_anthropic_stream_error_is_an_error_event_inside_a_200(
    subscription_sim: SimUpstream,
) -> None:
    subscription_sim.push_fault(StreamErrorFault(after_events=3))
    response = request(
        subscription_sim.url, "POST", "/v1/messages", message_body(stream=True), ANTHROPIC_HEADERS
    )
    assert response.status == 200
    events = response.events()
    assert [event.event for event in events] == [
        "message_start",
        "content_block_start",
        "ping",
        "error",
    ]
    assert events[-1].raw == (
        b'event: error\ndata: {"type":"error","error":'
        b'{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    )
    assert subscription_sim.tally.by_model() == {}


def test_anthropic_sdk_raises_on_the_in_stream_error(
    subscription_sim: SimUpstream, claude: anthropic.Anthropic
) -> None:
    subscription_sim.push_fault(StreamErrorFault(after_events=5))
    with (
        pytest.raises(anthropic.APIStatusError) as caught,
        claude.messages.stream(
            model="claude-sonnet-4-5", max_tokens=100, messages=[{"role": "user", "content": "x"}]
        ) as stream,
    ):
        list(stream.text_stream)
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["error"]["type"] == "overloaded_error"


def test_stream_error_waits_for_a_streaming_request(openai_sim: SimUpstream) -> None:
    openai_sim.push_fault(StreamErrorFault(after_events=1, message="boom"))
    plain = request(openai_sim.url, "POST", "/v1/chat/completions", chat_body(), OPENAI_AUTH)
    assert plain.status == 200
    streamed = request(
        openai_sim.url, "POST", "/v1/chat/completions", chat_body(stream=True), OPENAI_AUTH
    )
    assert streamed.status == 200
    events = streamed.events()
    assert len(events) == 2
    assert events[-1].json() == {
        "error": {"message": "boom", "type": "server_error", "param": None, "code": None}
    }
    assert b"[DONE]" not in streamed.body


def test_openai_sdk_raises_on_the_in_stream_error(
    openai_sim: SimUpstream, gpt: openai.OpenAI
) -> None:
    openai_sim.push_fault(StreamErrorFault(after_events=2))
    stream = gpt.chat.completions.create(
        model="gpt-4.1-mini", messages=[{"role": "user", "content": "x"}], stream=True
    )
    with pytest.raises(openai.APIError) as caught:
        list(stream)
    assert "The server had an error" in caught.value.message


# --- garbage ------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_garbage_is_a_200_json_labelled_non_json_body(
    subscription_sim: SimUpstream, stream: bool
) -> None:
    subscription_sim.push_fault(GarbageFault())
    response = request(
        subscription_sim.url, "POST", "/v1/messages", message_body(stream=stream), ANTHROPIC_HEADERS
    )
    assert response.status == 200
    assert response.header("content-type") == "application/json"
    with pytest.raises(orjson.JSONDecodeError):
        response.json()
