"""A stream belongs to the client only once it carries something a user would see.

Before that (a message start, an empty opening block or chunk, a ping, an added output
item) a dropped or failed upstream stream falls through to the next rung unseen.
"""

from __future__ import annotations

import random
from typing import Any

import httpx
import orjson

from rungway.sim import DisconnectFault, StreamErrorFault
from tests.integration.conftest import CLAUDE_CODE_HEADERS, StartGateway, Upstreams

HELLO = [{"role": "user", "content": "Say hello."}]
# The Anthropic plan opens with message_start, an empty text block and a ping.
OPENING_EVENTS = 3
LADDER = {"rung_budget_usd": {"cheap": 100.0, "premium": 100.0}}


def _request(api: str) -> tuple[str, dict[str, Any]]:
    if api == "anthropic":
        body = {"model": "auto/thrifty", "max_tokens": 64, "messages": HELLO, "stream": True}
        return "/v1/messages", body
    if api == "chat":
        return "/v1/chat/completions", {"model": "auto/thrifty", "messages": HELLO, "stream": True}
    return "/v1/responses", {"model": "auto/thrifty", "input": "Say hello.", "stream": True}


def _text(api: str, raw: bytes) -> tuple[str, bool, bool]:
    """The stream's text, whether it ended properly, and whether it carried an error."""
    text, ended, error = [], False, False
    for block in raw.split(b"\n\n"):
        data = next((line[6:] for line in block.split(b"\n") if line.startswith(b"data: ")), None)
        if data is None:
            continue
        if data == b"[DONE]":
            ended = True
            continue
        event = orjson.loads(data)
        kind = event.get("type")
        error = error or kind in ("error", "response.failed") or ("error" in event and not kind)
        if api == "anthropic":
            text.append((event.get("delta") or {}).get("text", ""))
            ended = ended or kind == "message_stop"
        elif api == "chat":
            text.extend(
                (c.get("delta") or {}).get("content") or "" for c in event.get("choices") or ()
            )
        else:
            if kind == "response.output_text.delta":
                text.append(event["delta"])
            ended = ended or kind == "response.completed"
    return "".join(text), ended, error


def test_faults_right_after_the_opening_events_fall_through_unseen(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway(ladder=LADDER)
    chance = random.Random(13)
    broken: list[tuple[int, str, str, int, str]] = []
    served: dict[str, int] = {}
    # Every request, in each of the three APIs, comes as Claude Code, the one client the
    # plan serves: this test is about where a stream commits, not about who may use the plan.
    with httpx.Client(base_url=gateway.url, timeout=30, headers=CLAUDE_CODE_HEADERS) as client:
        for number in range(200):
            api = ("anthropic", "chat", "responses")[number % 3]
            # Every other request is faulted; the clean ones between keep the plan's
            # breaker closed, so every fault meets the plan.
            faulted = number % 2 == 0
            after = chance.randint(1, OPENING_EVENTS)
            kind = chance.choice(("disconnect", "stream_error"))
            if faulted:
                sims.subscription.push_fault(
                    DisconnectFault(after_events=after)
                    if kind == "disconnect"
                    else StreamErrorFault(after_events=after, error_type="api_error")
                )
            path, body = _request(api)
            answer = client.post(path, json=body)
            text, ended, error = _text(api, answer.content)
            connection = answer.headers.get("x-rungway-connection", "")
            served[connection] = served.get(connection, 0) + 1
            if answer.status_code != 200 or error or not ended or len(text.split()) != 24:
                broken.append((number, api, kind, after, answer.text[-200:]))
    assert broken == []
    assert not sims.subscription.state().faults
    assert served["plan"] == 100
    assert sum(served.values()) == 200
