"""Failures fall through to the next connection; the client's own mistakes do not."""

from __future__ import annotations

import time
from typing import Any

import anthropic
import httpx
import openai
import pytest

from rungway.sim import (
    DisconnectFault,
    GarbageFault,
    HttpErrorFault,
    QuotaExhaustedFault,
    StreamErrorFault,
    TimeoutFault,
)
from tests.integration.conftest import (
    CLAUDE,
    CLAUDE_CODE_HEADERS,
    DEEPSEEK,
    StartGateway,
    Upstreams,
)

HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]


def _openai(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def _anthropic(url: str) -> anthropic.Anthropic:
    """Claude Code, the one client the plan serves: these tests are about falling through."""
    return anthropic.Anthropic(
        base_url=url, api_key="unused", max_retries=0, default_headers=CLAUDE_CODE_HEADERS
    )


def _attempts(row: dict[str, Any]) -> list[tuple[str, str]]:
    return [(attempt["connection_id"], attempt["outcome"]) for attempt in row["attempts"]]


def test_plan_window_exhausted_falls_through_to_the_api_key_until_it_resets(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    # The gateway reads time from the plan's clock, so the plan's cooldown ends at its reset.
    gateway = start_gateway(clock=sims.subscription.fake_clock)
    sims.subscription.push_fault(QuotaExhaustedFault(window="5h"))
    raw = _anthropic(gateway.url).messages.with_raw_response.create(
        model=CLAUDE, max_tokens=64, messages=HELLO
    )
    assert raw.parse().usage.output_tokens == 24
    assert raw.headers["x-rungway-connection"] == "api"
    with _anthropic(gateway.url).messages.stream(
        model=CLAUDE, max_tokens=64, messages=HELLO
    ) as stream:
        assert len("".join(stream.text_stream).split()) == 24
    # The 5h window resets: the next request is the plan's again.
    sims.subscription.fake_clock.advance(18_000)
    back = _anthropic(gateway.url).messages.with_raw_response.create(
        model=CLAUDE, max_tokens=64, messages=HELLO
    )
    assert back.headers["x-rungway-connection"] == "plan"
    rows = gateway.rows()
    assert [row["connection_id"] for row in rows] == ["plan", "api", "api"]
    # The plan, cooling down after its 429, is not asked again until its window resets.
    assert [_attempts(row) for row in rows] == [[], [], [("plan", "quota_exhausted")]]
    assert ("plan", "cooldown") in {
        (s["connection"], s["reason"]) for s in rows[1]["plan"]["skipped"]
    }
    assert sims.api.tally.total().requests == 2
    assert len(sims.subscription.requests) == 2


def test_server_error_falls_through(start_gateway: StartGateway, sims: Upstreams) -> None:
    gateway = start_gateway()
    sims.cheap.push_fault(HttpErrorFault(status=500))
    raw = _openai(gateway.url).chat.completions.with_raw_response.create(
        model=DEEPSEEK, messages=HELLO
    )
    assert raw.headers["x-rungway-connection"] == "backup"
    (row,) = gateway.rows()
    assert _attempts(row) == [("cheap", "server")]
    assert row["attempts"][0]["status"] == 500


def test_overloaded_stream_falls_through_before_any_content(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    sims.subscription.push_fault(StreamErrorFault(after_events=1))
    with _anthropic(gateway.url).messages.stream(
        model=CLAUDE, max_tokens=64, messages=HELLO
    ) as stream:
        text = "".join(stream.text_stream)
        message = stream.get_final_message()
    assert len(text.split()) == 24
    assert message.usage.output_tokens == 24
    (row,) = gateway.rows()
    assert row["connection_id"] == "api"
    assert _attempts(row) == [("plan", "overloaded")]


def test_timeout_falls_through(start_gateway: StartGateway, sims: Upstreams) -> None:
    gateway = start_gateway()
    sims.cheap.push_fault(TimeoutFault(delay_s=5))
    started = time.monotonic()
    chunks = list(
        _openai(gateway.url).chat.completions.create(model=DEEPSEEK, messages=HELLO, stream=True)
    )
    elapsed = time.monotonic() - started
    assert 1.4 < elapsed < 4.5
    assert chunks[-1].choices[0].finish_reason == "stop"
    (row,) = gateway.rows()
    assert row["connection_id"] == "backup"
    assert _attempts(row) == [("cheap", "timeout")]


@pytest.mark.parametrize("stream", [False, True])
def test_disconnect_before_content_falls_through(
    start_gateway: StartGateway, sims: Upstreams, stream: bool
) -> None:
    gateway = start_gateway()
    sims.cheap.push_fault(DisconnectFault(after_events=1))
    client = _openai(gateway.url)
    if stream:
        chunks = list(client.chat.completions.create(model=DEEPSEEK, messages=HELLO, stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        text = (
            client.chat.completions.create(model=DEEPSEEK, messages=HELLO)
            .choices[0]
            .message.content
            or ""
        )
    assert len(text.split()) == 24
    (row,) = gateway.rows()
    assert row["connection_id"] == "backup"
    assert _attempts(row) == [("cheap", "network")]


def test_disconnect_after_content_ends_the_stream_with_an_error_event(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    sims.subscription.push_fault(DisconnectFault(after_events=5))
    received: list[str] = []
    with (
        pytest.raises(anthropic.APIStatusError, match=r"ended early|cut off"),
        _anthropic(gateway.url).messages.stream(
            model=CLAUDE, max_tokens=64, messages=HELLO
        ) as stream,
    ):
        received.extend(stream.text_stream)
    assert received, "content had started before the upstream dropped"
    (row,) = gateway.rows()
    assert (row["connection_id"], row["outcome"]) == ("plan", "network")
    assert sims.api.requests == [], "content was sent: no fall-through after that"


def test_openai_in_stream_error_after_content_reaches_the_client(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    sims.cheap.push_fault(StreamErrorFault(after_events=4))
    with pytest.raises(openai.APIError):
        list(
            _openai(gateway.url).chat.completions.create(
                model=DEEPSEEK, messages=HELLO, stream=True
            )
        )
    (row,) = gateway.rows()
    assert row["connection_id"] == "cheap"
    assert row["outcome"] in {"server", "overloaded"}


def test_garbage_from_upstream_falls_through(start_gateway: StartGateway, sims: Upstreams) -> None:
    gateway = start_gateway()
    sims.cheap.push_fault(GarbageFault())
    completion = _openai(gateway.url).chat.completions.create(model=DEEPSEEK, messages=HELLO)
    assert completion.choices[0].message.content
    (row,) = gateway.rows()
    assert _attempts(row) == [("cheap", "server")]


def test_bad_request_goes_straight_back(start_gateway: StartGateway, sims: Upstreams) -> None:
    gateway = start_gateway()
    sims.cheap.push_fault(
        HttpErrorFault(status=400, message="Invalid type for 'messages[0].content'.")
    )
    with pytest.raises(openai.BadRequestError, match="Invalid type") as raised:
        _openai(gateway.url).chat.completions.create(model=DEEPSEEK, messages=HELLO)
    assert raised.value.response.headers["x-rungway-connection"] == "cheap"
    assert sims.backup.requests == []
    (row,) = gateway.rows()
    assert (row["outcome"], row["status"]) == ("bad_request", 400)


def test_when_every_connection_is_rate_limited_the_client_gets_429_and_the_wait(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    sims.cheap.push_fault(HttpErrorFault(status=429, retry_after_s=30))
    sims.backup.push_fault(HttpErrorFault(status=429, retry_after_s=12))
    with pytest.raises(openai.RateLimitError) as raised:
        _openai(gateway.url).chat.completions.create(model=DEEPSEEK, messages=HELLO)
    assert raised.value.response.headers["retry-after"] == "12"
    assert "cheap: rate_limited (HTTP 429)" in raised.value.message
    assert "backup: rate_limited (HTTP 429)" in raised.value.message
    (row,) = gateway.rows()
    assert row["outcome"] == "rate_limited"
    assert _attempts(row) == [("cheap", "rate_limited"), ("backup", "rate_limited")]


def test_unreachable_upstream_falls_through_and_alone_gives_502_recorded_for_explain(
    start_gateway: StartGateway, sims: Upstreams, unused_port: int
) -> None:
    dead = {
        "id": "dead",
        "provider": "ollama",
        "auth": "none",
        "base_url": f"http://127.0.0.1:{unused_port}/v1",
        "models": [DEEPSEEK, "only-dead"],
    }
    backup = {
        "id": "backup",
        "provider": "openai-compatible",
        "auth": "none",
        "base_url": sims.backup.url + "/v1",
        "models": [DEEPSEEK],
    }
    # The backup sim wants a key; give it one through a credentialed connection instead.
    gateway = start_gateway(
        connections=[dead, {**backup, "auth": "apikey", "credential": {"env": "RUNGWAY_IT_BACKUP"}}]
    )
    client = _openai(gateway.url)
    served = client.chat.completions.with_raw_response.create(model=DEEPSEEK, messages=HELLO)
    assert served.headers["x-rungway-connection"] == "backup"
    with pytest.raises(openai.APIStatusError, match=r"cannot connect to 127.0.0.1") as raised:
        client.chat.completions.create(model="only-dead", messages=HELLO)
    assert raised.value.status_code == 502
    # Newest first. The give-up reached no upstream, and is recorded so `explain` finds it.
    gave_up, first = gateway.rows()
    assert [first["connection_id"], gave_up["connection_id"]] == ["backup", None]
    assert _attempts(first) == [("dead", "network")]
    assert (gave_up["outcome"], gave_up["status"], gave_up["cost_usd"]) == ("network", 502, 0)
    assert _attempts(gave_up) == [("dead", "network")]
    assert httpx.get(f"{gateway.url}/healthz").json() == {"status": "ok"}
