"""Usage numbers that are not token counts, sent by a real upstream through the real gateway.

A raw HTTP upstream on loopback answers Chat Completions, Messages, Gemini and Responses
requests, in JSON and as streams, with one usage count replaced by something that is not a
count: 2^63, a negative, a fraction, a bool, a string. For each, the client gets the answer
in its own API's shape with every count in it a count, the ledger row exists with outcome
`invalid_usage` costing the hold's ceiling, the budget is charged that ceiling (never
credited), and the ledger goes on writing the requests after it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from rungway.app import build_gateway
from rungway.budget import cost_ceiling
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.ledger.sqlite import SqliteLedger, read_rows
from rungway.runner import BackgroundServer, uvicorn_config

DEEPSEEK = "deepseek-chat"
HAIKU = "claude-haiku-4-5"
FLASH = "gemini-2.0-flash"
MINI = "gpt-4.1-mini"
NOT_COUNTS: list[Any] = [2**63, -1_000_000, 1.5, True, "12"]


@dataclass
class Upstream:
    """What the raw upstream sends next, and the request bodies it received."""

    bad: Any = None
    """The output count to send; None sends a good one."""
    received: list[tuple[str, bytes]] = field(default_factory=list)


def _chat_usage(bad: Any) -> dict[str, Any]:
    return {"prompt_tokens": 12, "completion_tokens": 3 if bad is None else bad}


def _chat_answer(body: dict[str, Any], bad: Any) -> tuple[str, bytes]:
    message = {"role": "assistant", "content": "hi"}
    base = {"id": "c1", "created": 1, "model": DEEPSEEK}
    if not body.get("stream"):
        reply = {
            **base,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": _chat_usage(bad),
        }
        return "application/json", json.dumps(reply).encode()
    chunk = {**base, "object": "chat.completion.chunk"}
    events = [
        {**chunk, "choices": [{"index": 0, "delta": message, "finish_reason": None}]},
        {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**chunk, "choices": [], "usage": _chat_usage(bad)},
    ]
    data = b"".join(b"data: " + json.dumps(each).encode() + b"\n\n" for each in events)
    return "text/event-stream", data + b"data: [DONE]\n\n"


def _messages_answer(body: dict[str, Any], bad: Any) -> tuple[str, bytes]:
    output = 3 if bad is None else bad
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": HAIKU}
    if not body.get("stream"):
        reply = {
            **message,
            "content": [{"type": "text", "text": "hi"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": output},
        }
        return "application/json", json.dumps(reply).encode()
    start = {**message, "content": [], "usage": {"input_tokens": 12, "output_tokens": 1}}
    events = [
        ("message_start", {"type": "message_start", "message": start}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "hi"},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": output},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    data = b"".join(
        f"event: {name}\ndata: {json.dumps(each)}\n\n".encode() for name, each in events
    )
    return "text/event-stream", data


def _gemini_answer(path: str, bad: Any) -> tuple[str, bytes]:
    usage = {"promptTokenCount": 12, "candidatesTokenCount": 3 if bad is None else bad}
    text = {"content": {"role": "model", "parts": [{"text": "hi"}]}, "index": 0}
    if ":streamGenerateContent" not in path:
        reply = {"candidates": [{**text, "finishReason": "STOP"}], "usageMetadata": usage}
        return "application/json", json.dumps(reply).encode()
    chunks = [
        {"candidates": [text], "usageMetadata": {"promptTokenCount": 12}},
        {"candidates": [{**text, "finishReason": "STOP"}], "usageMetadata": usage},
    ]
    data = b"".join(b"data: " + json.dumps(each).encode() + b"\n\n" for each in chunks)
    return "text/event-stream", data


def _responses_answer(body: dict[str, Any], bad: Any) -> tuple[str, bytes]:
    part = {"type": "output_text", "text": "hi", "annotations": []}
    item = {"type": "message", "id": "m1", "role": "assistant", "content": [part]}
    response = {
        "id": "resp_1",
        "object": "response",
        "model": MINI,
        "status": "completed",
        "output": [{**item, "status": "completed"}],
        "usage": {"input_tokens": 12, "output_tokens": 3 if bad is None else bad},
    }
    if not body.get("stream"):
        return "application/json", json.dumps(response).encode()
    events: list[dict[str, Any]] = [
        {"type": "response.output_text.delta", "item_id": "m1", "delta": "hi"},
        {"type": "response.completed", "response": response},
    ]
    data = b"".join(
        f"event: {each['type']}\ndata: {json.dumps(each)}\n\n".encode() for each in events
    )
    return "text/event-stream", data


def _handler(upstream: Upstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["content-length"]))
            upstream.received.append((self.path, raw))
            body = json.loads(raw)
            if "enerateContent" in self.path:
                kind, data = _gemini_answer(self.path, upstream.bad)
            elif self.path.endswith("/responses"):
                kind, data = _responses_answer(body, upstream.bad)
            elif self.path.endswith("/messages"):
                kind, data = _messages_answer(body, upstream.bad)
            else:
                kind, data = _chat_answer(body, upstream.bad)
            self.send_response(200)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            """Quiet."""

    return Handler


@dataclass
class Served:
    url: str
    ledger: SqliteLedger
    upstream: Upstream

    def spent(self) -> float:
        body = httpx.get(f"{self.url}/admin/spend", timeout=5).json()
        [cheap] = [each for each in body["budgets"]["rungs"] if each["rung"] == "cheap"]
        return float(cheap["spent_usd"])

    def rows(self) -> dict[str, dict[str, Any]]:
        self.ledger.flush()
        return {row["request_id"]: row for row in read_rows(self.ledger.path, limit=10_000)}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("usage")
    upstream = Upstream()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(upstream))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    (folder / "key").write_text("sk-upstream")
    connections = [
        ("deepseek", DEEPSEEK, f"{base}/v1"),
        ("anthropic", HAIKU, base),
        ("gemini", FLASH, f"{base}/v1beta"),
        ("openai-responses", MINI, f"{base}/v1"),
    ]
    settings = parse_settings(
        {
            "ledger": {"path": str(folder / "ledger.sqlite3")},
            "quota": {"poll_interval_s": 0},
            "ladder": {"rung_budget_usd": {"cheap": 100.0}},
            "connections": [
                {
                    "id": provider,
                    "provider": provider,
                    "auth": "apikey",
                    "credential": {"file": str(folder / "key")},
                    "base_url": url,
                    "models": [model],
                }
                for provider, model, url in connections
            ],
        }
    )
    gateway = build_gateway(settings, read_secrets(settings))
    assert isinstance(gateway.ledger, SqliteLedger)
    with BackgroundServer(uvicorn_config(gateway.app), "gateway") as running:
        yield Served(running.url, gateway.ledger, upstream)
    server.shutdown()
    server.server_close()


def _ask(url: str, route: str, *, stream: bool) -> httpx.Response:
    """One request: `chat` (Chat to deepseek), `messages` (Messages to Claude),
    `translated` (Chat to Claude), `gemini` (Gemini to Gemini) or `responses` (Responses
    to OpenAI's Responses API)."""
    if route == "gemini":
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        contents = {
            "contents": [{"role": "user", "parts": [{"text": "Say hi."}]}],
            "generationConfig": {"maxOutputTokens": 64},
        }
        return httpx.post(f"{url}/v1beta/models/{FLASH}:{method}", json=contents, timeout=10)
    if route == "responses":
        asked = {"model": MINI, "input": "Say hi.", "max_output_tokens": 64, "stream": stream}
        return httpx.post(f"{url}/v1/responses", json=asked, timeout=10)
    model = DEEPSEEK if route == "chat" else HAIKU
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "Say hi."}],
        "stream": stream,
    }
    if route == "messages":
        headers = {"anthropic-version": "2023-06-01"}
        return httpx.post(f"{url}/v1/messages", json=body, headers=headers, timeout=10)
    if stream:
        body["stream_options"] = {"include_usage": True}
    return httpx.post(f"{url}/v1/chat/completions", json=body, timeout=10)


def _upstream_of(path: str) -> tuple[str, str]:
    """The provider and model a request to the raw upstream at `path` went to."""
    if "enerateContent" in path:
        return "gemini", FLASH
    if path.endswith("/responses"):
        return "openai-responses", MINI
    if path.endswith("/messages"):
        return "anthropic", HAIKU
    return "deepseek", DEEPSEEK


def _counts(value: Any) -> list[Any]:
    """Every count field's value in a JSON answer or event."""
    if isinstance(value, dict):
        found = []
        for name, inner in value.items():
            counted = name.endswith(("tokens", "TokenCount"))
            found += [inner] if counted else _counts(inner)
        return found
    if isinstance(value, list):
        return [each for inner in value for each in _counts(inner)]
    return []


def _check_shape(answer: httpx.Response, route: str, *, stream: bool) -> None:
    """The answer is a whole one in the client's API, its text the upstream's, and every
    count in it a count: the ones that were not read 0."""
    assert answer.status_code == 200, answer.text
    if stream:
        events = [line[6:] for line in answer.text.splitlines() if line.startswith("data: ")]
        counts = [
            each for event in events if event != "[DONE]" for each in _counts(json.loads(event))
        ]
        assert counts, "the usage reached the client"
        assert all(type(each) is int and 0 <= each <= 10**9 for each in counts), counts
        if route == "messages":
            assert json.loads(events[-1]) == {"type": "message_stop"}
            assert '"text": "hi"' in answer.text or '"text":"hi"' in answer.text
        elif route == "gemini":
            assert json.loads(events[-1])["candidates"][0]["finishReason"] == "STOP"
        elif route == "responses":
            assert json.loads(events[-1])["type"] == "response.completed"
        else:
            assert events[-1] == "[DONE]"
            assert any(json.loads(each).get("choices") and "hi" in each for each in events[:-1])
        return
    body = answer.json()
    assert all(type(each) is int and 0 <= each <= 10**9 for each in _counts(body)), body
    if route == "messages":
        assert body["content"][0]["text"] == "hi"
    elif route == "gemini":
        assert body["candidates"][0]["content"]["parts"][0]["text"] == "hi"
    elif route == "responses":
        assert body["output"][0]["content"][0]["text"] == "hi"
    else:
        assert body["choices"][0]["message"]["content"] == "hi"
    if route == "translated":
        # Written by the gateway from what it read: counts, never the upstream's nonsense.
        usage = body["usage"]
        assert all(isinstance(usage[name], int) for name in ("prompt_tokens", "total_tokens"))
        assert usage["completion_tokens"] == 0


ROUTES = [
    (route, stream)
    for route in ("chat", "messages", "translated", "gemini", "responses")
    for stream in (False, True)
]


@pytest.mark.parametrize(
    ("route", "stream"), ROUTES, ids=[f"{r}-{'stream' if s else 'json'}" for r, s in ROUTES]
)
def test_usage_that_is_not_a_count_bills_the_ceiling_and_the_ledger_goes_on(
    served: Served, route: str, stream: bool
) -> None:
    before = served.spent()
    ceilings: dict[str, float] = {}
    for bad in NOT_COUNTS:
        served.upstream.bad = bad
        sent_before = len(served.upstream.received)
        answer = _ask(served.url, route, stream=stream)
        _check_shape(answer, route, stream=stream)
        [(path, raw)] = served.upstream.received[sent_before:]
        provider, model = _upstream_of(path)
        ceiling = cost_ceiling(provider, model, json.loads(raw), len(raw))
        assert ceiling > 0
        ceilings[answer.headers["x-rungway-request-id"]] = ceiling

    rows = served.rows()
    for request_id, ceiling in ceilings.items():
        row = rows[request_id]
        assert row["outcome"] == "invalid_usage"
        assert row["cost_usd"] == pytest.approx(ceiling, rel=1e-9)
        assert row["list_cost_usd"] is None
        [flag] = [each for each in row["attempts"] if each["outcome"] == "invalid_usage"]
        assert "not a token count" in flag["detail"]
    # Each is charged its ceiling: none is credited, none costs less.
    assert served.spent() == pytest.approx(before + sum(ceilings.values()), rel=1e-9)

    # The writer goes on: the next requests, whose usage is good, are written (eight on the
    # routes 2^63 once stopped it on, one on the others, to keep the test short).
    follow = 8 if route in ("chat", "messages") else 1
    before = served.spent()
    served.upstream.bad = None
    ids = [
        _ask(served.url, route, stream=stream).headers["x-rungway-request-id"]
        for _ in range(follow)
    ]
    rows = served.rows()
    assert [rows[each]["outcome"] for each in ids] == ["ok"] * follow
    assert all(rows[each]["cost_usd"] > 0 for each in ids)
    assert served.spent() > before
