"""A stream that keeps its line alive with pings but says nothing falls through at the
first-content deadline, and a stream that never ends is cut at the longest a stream may
run, with the API's error event."""

from __future__ import annotations

import time
from typing import Any

import anthropic
import openai
import pytest

from rungway.sim import StallFault
from tests.integration.conftest import (
    CLAUDE,
    CLAUDE_CODE_HEADERS,
    DEEPSEEK,
    StartGateway,
    Upstreams,
)

HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]
TIMEOUTS = {
    "connect_s": 2,
    "first_byte_s": 3,
    "idle_s": 3,
    "first_content_s": 1,
    "max_stream_s": 1.5,
}


def test_a_plan_that_only_pings_falls_through_at_the_first_content_deadline(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway(timeouts=TIMEOUTS)
    # message_start, then a ping every 0.2 s: each one would reset an idle timer.
    sims.subscription.push_fault(StallFault(after_events=1, interval_s=0.2, duration_s=60))
    started = time.monotonic()
    # Claude Code, the one client the plan serves.
    client = anthropic.Anthropic(
        base_url=gateway.url,
        api_key="unused",
        max_retries=0,
        default_headers=CLAUDE_CODE_HEADERS,
    )
    with client, client.messages.stream(model=CLAUDE, max_tokens=64, messages=HELLO) as stream:
        text = "".join(stream.text_stream)
    elapsed = time.monotonic() - started
    assert len(text.split()) == 24, "the whole reply came from the next connection"
    assert 1.0 <= elapsed < 3.0
    (row,) = gateway.rows()
    assert row["connection_id"] == "api"
    (attempt,) = row["attempts"]
    assert attempt["connection_id"] == "plan"
    assert attempt["outcome"] == "timeout"
    assert "no content within 1s" in attempt["detail"]


def test_an_openai_stream_of_keep_alive_comments_falls_through_too(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway(timeouts=TIMEOUTS)
    sims.cheap.push_fault(StallFault(after_events=1, interval_s=0.2, duration_s=60))
    with openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0) as client:
        chunks = list(
            client.chat.completions.create(
                model=DEEPSEEK, messages=HELLO, stream=True, stream_options={"include_usage": True}
            )
        )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text
    (row,) = gateway.rows()
    assert row["connection_id"] == "backup"
    assert [(a["connection_id"], a["outcome"]) for a in row["attempts"]] == [("cheap", "timeout")]


def test_a_stream_that_never_ends_is_cut_at_the_longest_a_stream_may_run(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway(timeouts=TIMEOUTS)
    # message_start, an empty block, a ping and the first text (so the stream is the
    # client's), then pings for a minute.
    sims.subscription.push_fault(StallFault(after_events=4, interval_s=0.2, duration_s=60))
    started = time.monotonic()
    # Claude Code, the one client the plan serves.
    client = anthropic.Anthropic(
        base_url=gateway.url,
        api_key="unused",
        max_retries=0,
        default_headers=CLAUDE_CODE_HEADERS,
    )
    with (
        client,
        pytest.raises(anthropic.APIStatusError) as ended,
        client.messages.stream(model=CLAUDE, max_tokens=64, messages=HELLO) as stream,
    ):
        for _ in stream:
            pass
    elapsed = time.monotonic() - started
    assert "ran past its limit of 1.5s" in str(ended.value)
    assert elapsed < 4.0, "cut at the limit, not after the upstream's minute"
    (row,) = gateway.rows()
    assert row["connection_id"] == "plan"
    assert row["outcome"] == "timeout"
