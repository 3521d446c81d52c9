"""Adapters build upstream requests that keep the client's fields and identity."""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import SecretStr

from rungway.adapters.anthropic.messages import OAUTH_BETA, AnthropicMessagesAdapter
from rungway.adapters.base import Connection, EventKind
from rungway.adapters.openai.chat import OpenAIChatAdapter
from rungway.protocol.auth import Auth
from rungway.protocol.sse import SseSplitter
from tests.unit.adapters.calls import call_of

PLAN = Connection(
    "plan", "anthropic", Auth.OAUTH, SecretStr("sk-ant-oat01-x"), "http://up", frozenset({"m"})
)
KEY = Connection(
    "key", "anthropic", Auth.APIKEY, SecretStr("sk-ant-api03-y"), "http://up", frozenset({"m"})
)
CHEAP = Connection(
    "cheap", "deepseek", Auth.APIKEY, SecretStr("sk-z"), "http://up/v1", frozenset({"m"})
)
LOCAL = Connection("local", "ollama", Auth.NONE, None, "http://up/v1", frozenset({"m"}))


def test_unchanged_model_forwards_the_clients_bytes_exactly() -> None:
    raw = b'{"model":"m","max_tokens":5,"messages":[],"x_unknown":{"kept":1.50}}'
    request = AnthropicMessagesAdapter().build_request(call_of(KEY, orjson.loads(raw), raw=raw))
    assert request.body is raw


def test_renamed_model_keeps_every_other_field() -> None:
    raw = b'{"model":"key/m","max_tokens":5,"messages":[],"x_unknown":{"kept":[1,2]}}'
    request = AnthropicMessagesAdapter().build_request(call_of(KEY, orjson.loads(raw), raw=raw))
    assert orjson.loads(request.body) == {**orjson.loads(raw), "model": "m"}


def test_thinking_another_provider_made_is_not_sent_back_to_anthropic() -> None:
    # A translated reply gave the client thinking with an empty signature; its own signed
    # thinking stays.
    assistant = [
        {"type": "thinking", "thinking": "from elsewhere", "signature": ""},
        {"type": "thinking", "thinking": "from claude", "signature": "c2ln"},
        {"type": "text", "text": "hi"},
    ]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": assistant},
        {"role": "user", "content": "y"},
    ]
    body = {"model": "m", "max_tokens": 5, "messages": messages}
    request = AnthropicMessagesAdapter().build_request(call_of(KEY, body))
    sent = orjson.loads(request.body)
    assert sent["messages"][1]["content"] == assistant[1:]
    assert sent["messages"][0] == messages[0]


def test_plan_login_uses_bearer_and_the_oauth_beta_next_to_the_clients_betas() -> None:
    client = {
        "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14",
        "user-agent": "claude-cli/2.1.0 (external, cli)",
        "x-app": "cli",
        "authorization": "Bearer client-key-for-the-gateway",
        "x-api-key": "client-key-for-the-gateway",
    }
    request = AnthropicMessagesAdapter().build_request(
        call_of(PLAN, {"model": "m"}, raw=b"{}", headers=client, query="beta=true")
    )
    assert request.url == "http://up/v1/messages?beta=true"
    assert request.headers["authorization"] == "Bearer sk-ant-oat01-x"
    assert "x-api-key" not in request.headers
    assert request.headers["anthropic-beta"].split(",") == [
        "claude-code-20250219",
        "interleaved-thinking-2025-05-14",
        OAUTH_BETA,
    ]
    assert request.headers["user-agent"] == "claude-cli/2.1.0 (external, cli)"
    assert request.headers["x-app"] == "cli"
    assert request.headers["anthropic-version"] == "2023-06-01"


def test_api_key_connection_never_forges_client_identity() -> None:
    request = AnthropicMessagesAdapter().build_request(call_of(KEY, {"model": "m"}, raw=b"{}"))
    assert request.headers["x-api-key"] == "sk-ant-api03-y"
    assert "authorization" not in request.headers
    assert "user-agent" not in request.headers
    assert "anthropic-beta" not in request.headers


def test_openai_stream_asks_for_usage_and_marks_the_chunk_for_removal() -> None:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    request = OpenAIChatAdapter().build_request(call_of(CHEAP, body))
    assert orjson.loads(request.body)["stream_options"] == {"include_usage": True}
    assert request.strip_usage_chunk
    assert request.url == "http://up/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-z"


def test_openai_stream_that_asked_for_usage_keeps_it() -> None:
    body = {"model": "m", "stream": True, "stream_options": {"include_usage": True}}
    raw = orjson.dumps(body)
    request = OpenAIChatAdapter().build_request(call_of(LOCAL, body, raw=raw))
    assert request.body is raw
    assert not request.strip_usage_chunk
    assert "authorization" not in request.headers


def test_openai_watcher_drops_only_the_injected_usage_chunk() -> None:
    stream = (
        b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},'
        b'"finish_reason":null}],"usage":null}\n\n'
        b'data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}],'
        b'"usage":null}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}\n\n'
        b'data: {"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,'
        b'"prompt_tokens_details":{"cached_tokens":4}}}\n\n'
        b"data: [DONE]\n\n"
    )
    watcher = OpenAIChatAdapter().watch_stream(strip_usage_chunk=True)
    kinds = [watcher.see(event) for event in SseSplitter().feed(stream)]
    assert kinds == [
        EventKind.PREAMBLE,
        EventKind.CONTENT,
        EventKind.CONTENT,
        EventKind.DROP,
        EventKind.CONTENT,
    ]
    assert (watcher.usage.input_tokens, watcher.usage.cache_read_tokens) == (8, 4)
    assert watcher.usage.output_tokens == 3
    assert watcher.finished


def test_anthropic_watcher_takes_cumulative_usage_and_spots_in_stream_errors() -> None:
    stream = (
        b'event: message_start\ndata: {"type":"message_start","message":{"usage":'
        b'{"input_tokens":25,"output_tokens":1,"cache_read_input_tokens":7}}}\n\n'
        b'event: ping\ndata: {"type":"ping"}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":30}}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":89}}\n\n'
        b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
        b'"message":"Overloaded"}}\n\n'
    )
    watcher = AnthropicMessagesAdapter().watch_stream(strip_usage_chunk=False)
    kinds = [watcher.see(event) for event in SseSplitter().feed(stream)]
    # An empty opening block and usage show the user nothing: still held back.
    assert kinds[:-1] == [EventKind.PREAMBLE] * 5
    assert kinds[-1] is EventKind.ERROR
    assert watcher.usage.input_tokens == 25
    assert watcher.usage.cache_read_tokens == 7
    assert watcher.usage.output_tokens == 89
    assert watcher.failure is not None
    assert watcher.failure.kind.value == "overloaded"
    assert not watcher.finished
