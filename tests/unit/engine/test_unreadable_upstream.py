"""An upstream whose reply or stream event its API does not allow.

The watcher, or on a translated route the codec, trips on whatever shape came. That is the
upstream's fault, not the gateway's: before anything reaches the client the request falls
through to the next connection, and after, the stream ends with the client API's error
event, recorded once, with no hold left open.
"""

from __future__ import annotations

import asyncio
import dataclasses

import orjson

from rungway.engine.call import Reply
from rungway.protocol.api import Api
from rungway.protocol.asgi import Receive, Scope, Send
from tests.unit.engine.world import (
    chat_call,
    gateway_of,
    openai_route,
    openai_sim,
    plan_with,
    read_stream,
)

MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "gpt-4o-mini"}
USAGE = {"input_tokens": 5, "output_tokens": 2}


class Canned:
    """An Anthropic-style upstream that answers every request with the same bytes, sent
    in the pieces given."""

    def __init__(self, *pieces: bytes, stream: bool) -> None:
        self.pieces = pieces
        self.content_type = b"text/event-stream" if stream else b"application/json"
        self.requests = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.requests += 1
        while (await receive()).get("more_body"):
            pass
        headers = [(b"content-type", self.content_type)]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for at, piece in enumerate(self.pieces, start=1):
            more = at < len(self.pieces)
            await send({"type": "http.response.body", "body": piece, "more_body": more})


def _event(name: str, data: object) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def test_a_reply_of_the_wrong_shape_falls_through_to_the_next() -> None:
    # A content block that is not an object: Anthropic's API never sends one.
    garbled = Canned(orjson.dumps({**MESSAGE, "content": ["hello"], "usage": USAGE}), stream=False)
    gateway = gateway_of(a=garbled, b=openai_sim())
    plan = plan_with(openai_route("a", "anthropic-compatible"), openai_route("b"))
    outcome = asyncio.run(gateway.engine.complete(chat_call(), plan))
    assert isinstance(outcome, Reply)
    assert outcome.status == 200
    [row] = gateway.ledger.rows
    assert row.connection_id == "b"
    [attempt] = row.attempts
    assert (attempt.connection_id, attempt.outcome) == ("a", "server")
    assert "reply cannot be read" in attempt.detail
    assert gateway.nothing_held()


def _stream_of(*pieces: bytes) -> Canned:
    return Canned(*pieces, stream=True)


START = _event("message_start", {"type": "message_start", "message": {**MESSAGE, "usage": USAGE}})
OPEN = _event(
    "content_block_start",
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
)
TEXT = _event(
    "content_block_delta",
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
)
# A delta that is not an object: Anthropic's API never sends one.
GARBLED = _event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": 7})


def test_a_stream_unreadable_before_its_content_falls_through() -> None:
    gateway = gateway_of(a=_stream_of(START + OPEN, GARBLED), b=openai_sim())
    plan = plan_with(openai_route("a", "anthropic-compatible"), openai_route("b"))

    async def run() -> bytes:
        return await read_stream(await gateway.engine.complete(chat_call(stream=True), plan))

    body = asyncio.run(run())
    assert body.rstrip().endswith(b"data: [DONE]")
    [row] = gateway.ledger.rows
    assert (row.connection_id, row.outcome) == ("b", "ok")
    [attempt] = row.attempts
    assert (attempt.connection_id, attempt.outcome) == ("a", "server")
    assert gateway.nothing_held()


def test_a_stream_unreadable_after_its_content_ends_with_an_error_event() -> None:
    # The bad event comes in a later piece than the content, which has gone to the client.
    gateway = gateway_of(a=_stream_of(START + OPEN + TEXT, GARBLED), b=openai_sim())
    plan = plan_with(openai_route("a", "anthropic-compatible"), openai_route("b"))

    async def run() -> bytes:
        return await read_stream(await gateway.engine.complete(chat_call(stream=True), plan))

    body = asyncio.run(run())
    # The text read before the bad event reaches the client, then Chat's error event.
    assert b'"content":"Hi"' in body
    assert b"stream cannot be read" in body
    [row] = gateway.ledger.rows
    assert (row.connection_id, row.outcome) == ("a", "server")
    assert gateway.nothing_held()
    assert len(gateway.budget.settled) == 1


NOT_JSON = b"event: message_delta\ndata: {not json\n\n"
END = _event(
    "message_delta",
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": USAGE},
) + _event("message_stop", {"type": "message_stop"})


def test_a_stream_event_that_is_not_json_falls_through_on_the_same_api() -> None:
    # The watcher, not a translator, meets it: an Anthropic client on an Anthropic route.
    gateway = gateway_of(
        a=_stream_of(START + OPEN, NOT_JSON), b=_stream_of(START + OPEN + TEXT + END)
    )
    plan = plan_with(
        openai_route("a", "anthropic-compatible"), openai_route("b", "anthropic-compatible")
    )
    call = dataclasses.replace(
        chat_call(stream=True),
        api=Api.ANTHROPIC_MESSAGES,
        body={"model": "gpt-4o-mini", "max_tokens": 64, "stream": True, "messages": []},
    )

    async def run() -> bytes:
        return await read_stream(await gateway.engine.complete(call, plan))

    body = asyncio.run(run())
    assert b'"text":"Hi"' in body
    [row] = gateway.ledger.rows
    assert row.connection_id == "b"
    [attempt] = row.attempts
    assert (attempt.connection_id, attempt.outcome) == ("a", "server")
    assert "stream cannot be read" in attempt.detail
    assert gateway.nothing_held()
