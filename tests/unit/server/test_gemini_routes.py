"""Gemini's paths split once into model and method, its client keys in the query, and its
JSON-array stream made of the gateway's SSE frames."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from pydantic import SecretStr

from rungway.protocol.asgi import Message
from rungway.server.auth import ClientKeys, query_key, without_key
from rungway.server.gemini_routes import JsonArrayStream, gemini_hint, split


@pytest.mark.parametrize(
    ("path", "parts"),
    [
        ("/v1beta/models", ("", "")),
        ("/v1/models", ("", "")),
        ("/v1beta/models/gemini-2.5-pro", ("gemini-2.5-pro", "/")),
        ("/v1beta/models/gemini-2.5-pro:generateContent", ("gemini-2.5-pro", ":generateContent")),
        (
            "/v1/models/auto/thrifty:streamGenerateContent",
            ("auto/thrifty", ":streamGenerateContent"),
        ),
        # A model id with a colon of its own keeps it: the method is after the last one.
        ("/v1beta/models/deepseek/r1:free:countTokens", ("deepseek/r1:free", ":countTokens")),
        ("/v1beta/modelsx", None),
        ("/v1beta/tunedModels/x:generateContent", None),
        ("/v1/chat/completions", None),
    ],
)
def test_a_path_splits_into_model_and_method(path: str, parts: tuple[str, str] | None) -> None:
    assert split(path) == parts


def test_a_client_key_is_read_from_google_header_or_query_and_kept_out_of_the_query() -> None:
    keys = ClientKeys({"gem": SecretStr("rk-1")})
    assert keys.identify({"x-goog-api-key": "rk-1"}) == "gem"
    assert keys.identify({}, "alt=sse&key=rk-1") == "gem"
    assert keys.identify({}, "key=rk-2") is None
    assert keys.identify({}, "alt=sse") is None
    assert query_key("alt=sse&key=a%2Bb") == "a+b"
    assert without_key("alt=sse&key=rk-1") == "alt=sse"
    assert without_key("key=rk-1") == ""
    assert without_key("beta=true") == "beta=true"


def test_a_missed_gemini_method_path_gets_a_base_url_hint() -> None:
    assert gemini_hint("/v1beta/v1beta/models/m:generateContent") is not None
    assert gemini_hint("/gemini/models/m:streamGenerateContent") is not None
    assert gemini_hint("/v1beta/v1beta/models/m:embedContent") is None
    assert gemini_hint("/v2/chat/completions") is None


def test_a_json_array_stream_joins_events_split_anywhere_and_skips_keep_alives() -> None:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def run() -> None:
        stream = JsonArrayStream(send)
        headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"x-a", b"1")]
        await stream({"type": "http.response.start", "status": 200, "headers": headers})
        frames = b'data: {"a":1}\r\n\r\n: keep-alive\n\ndata: {"b":2}\r\n\r\ndata: {"c":3}\r\n\r\n'
        for piece in (frames[:7], frames[7:30], frames[30:]):
            await stream({"type": "http.response.body", "body": piece, "more_body": True})
        await stream({"type": "http.response.body", "body": b""})

    asyncio.run(run())
    assert sent[0]["headers"] == [
        (b"content-type", b"application/json; charset=utf-8"),
        (b"x-a", b"1"),
    ]
    body = b"".join(message.get("body", b"") for message in sent[1:])
    assert orjson.loads(body) == [{"a": 1}, {"b": 2}, {"c": 3}]
    assert sent[-1].get("more_body", False) is False


def test_a_json_array_stream_leaves_a_refusal_alone() -> None:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def run() -> None:
        stream = JsonArrayStream(send)
        headers = [(b"content-type", b"application/json")]
        await stream({"type": "http.response.start", "status": 429, "headers": headers})
        await stream({"type": "http.response.body", "body": b'{"error": {}}'})

    asyncio.run(run())
    assert sent[0]["headers"] == [(b"content-type", b"application/json")]
    assert sent[1]["body"] == b'{"error": {}}'
