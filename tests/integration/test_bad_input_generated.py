"""A generated run of malformed requests: every one a 400 in its API's shape, none sent on.

A seeded generator takes a well-formed body of each API and breaks it one way: a wrong
type or value at any field the gateway reads (at every depth), a missing field, absurd
nesting, huge numbers, a duplicate key whose last value is wrong, bad UTF-8 or JSON,
a body that is not an object, an over-long model name. The bodies go to every model
endpoint, for models served natively and through translation (aliases included), on one
keep-alive connection to a gateway on loopback.
"""

from __future__ import annotations

import copy
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from rungway.sim import Scenario, SimUpstream
from tests.integration.conftest import CLAUDE, DEEPSEEK, StartGateway, Upstreams

REQUESTS = 5_200
SEED = 20_260_513
RESPONSES_KEY = "sk-generated-responses"
GPT = "gpt-5"
# Each API's own models and the others', by name, by alias and by glob alias, and the ladder.
MODELS = (CLAUDE, DEEPSEEK, GPT, "fast", "to-responses", "claude-sonnet-made-up", "auto/thrifty")

Json = Any
NUMBERS_WRONG: tuple[Json, ...] = (True, False, -1, 0, "x", 2**31, 2**63 - 1, 1.5, 1e300, [], {})


def _chat(model: str) -> dict[str, Json]:
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "ok"}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "and this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ],
            },
        ],
        "tools": [
            {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
        ],
        "tool_choice": "auto",
        "max_tokens": 16,
        "temperature": 0.5,
        "stop": ["\n\n"],
        "stream": False,
    }


def _messages(model: str) -> dict[str, Json]:
    return {
        "model": model,
        "max_tokens": 16,
        "system": [{"type": "text", "text": "be brief"}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "hi"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "sig"},
                    {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "ok"}],
                        "is_error": False,
                    }
                ],
            },
        ],
        "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "auto"},
        "metadata": {"user_id": "u"},
        "stop_sequences": ["\n\n"],
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "stream": False,
    }


def _responses(model: str) -> dict[str, Json]:
    return {
        "model": model,
        "instructions": "be brief",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {"type": "reasoning", "summary": [], "encrypted_content": "abc"},
        ],
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        "tool_choice": "auto",
        "max_output_tokens": 16,
        "reasoning": {"effort": "low"},
        "temperature": 0.5,
        "stream": False,
    }


_MODEL_WRONG: tuple[Json, ...] = (5, "", [], {}, True)
# Where each API's well-formed body can be broken, and values that are wrong there (null
# only where a field is required: an optional field set to null is left out).
CHAT_BREAKS: dict[str, tuple[Json, ...]] = {
    "model": _MODEL_WRONG,
    "messages": (5, "hi", [], {}, [5], None),
    "messages.1": (5, "x", [], None),
    "messages.1.role": (5, "robot", None, [], {}),
    "messages.1.content": (5, True, {}),
    "messages.4.content.0": (5, "x", None, {}),
    "messages.4.content.0.type": (5, None, [], {}),
    "messages.4.content.0.text": (5, None, [], {}),
    "messages.4.content.1.image_url": (5, None, [], {}),
    "messages.2.tool_calls": (5, "x", {}),
    "messages.2.tool_calls.0": (5, "x", None, []),
    "messages.2.tool_calls.0.function": (5, "x", None, []),
    "messages.2.tool_calls.0.function.name": (5, None, [], {}),
    "messages.2.tool_calls.0.function.arguments": (5, [], True),
    "messages.3.tool_call_id": (5, None, []),
    "max_tokens": NUMBERS_WRONG,
    "max_completion_tokens": NUMBERS_WRONG,
    "stream": ("yes", 1, [], {}),
    "stream_options": (5, "x", [], {"include_usage": "yes"}),
    "temperature": ("hot", True, [], {}),
    "top_p": ("x", False, []),
    "stop": (5, [1], {}, True),
    "tools": (7, "x", {}, True, [5]),
    "tools.0.function": (5, "x", [], None),
    "tools.0.function.name": (5, "", None, []),
    "tools.0.function.parameters": (5, "x", [], True),
    "tool_choice": (5, "sometimes", [], {}, {"type": 5}),
    "parallel_tool_calls": ("x", 1),
    "reasoning_effort": (5, [], {}),
    "user": (5, [], {}),
}
MESSAGES_BREAKS: dict[str, tuple[Json, ...]] = {
    "model": _MODEL_WRONG,
    "messages": (5, "hi", {}, [5], None),
    "messages.0": (5, "x", [], None),
    "messages.0.role": (5, "robot", None, []),
    "messages.0.content": (5, None, {}, True),
    "messages.0.content.0": (5, "x", None, []),
    "messages.0.content.0.type": (5, None, []),
    "messages.0.content.0.text": (5, None, []),
    "messages.0.content.1.source": (5, "x", None, [], {}),
    "messages.0.content.1.source.data": (5, None),
    "messages.1.content.0.thinking": (5, None),
    "messages.1.content.0.signature": (5, []),
    "messages.1.content.1.id": (5, None),
    "messages.1.content.1.name": (5, None),
    "messages.1.content.1.input": (5, "x", []),
    "messages.2.content.0.tool_use_id": (5, None),
    "messages.2.content.0.content": (5, {}, True, [5]),
    "messages.2.content.0.is_error": ("x", 5),
    "system": (5, {}, True, [5], [{"type": 5}]),
    "stream": ("yes", 1),
    "temperature": ("x", True),
    "top_p": ("x", []),
    "stop_sequences": ("x", 5, [1]),
    "metadata": ([1], 5, "x"),
    "metadata.user_id": (5, []),
    "tools": (7, "x", {}, [5]),
    "tools.0.name": (5, None, ""),
    "tools.0.input_schema": (5, None, "x", []),
    "tools.0.description": (5, []),
    "tools.0.type": (5, []),
    "tool_choice": (5, "auto", [], {}, {"type": "bogus"}),
    "tool_choice.type": (5, None, "bogus"),
    "thinking": (5, "x", [], {}),
    "thinking.budget_tokens": ("x", -1, 0, True, 2**31, None),
    "output_config": (5, "x"),
}
# Only a Messages request (not a token count) must say how much it may write.
MESSAGES_ONLY_BREAKS: dict[str, tuple[Json, ...]] = {"max_tokens": (None, *NUMBERS_WRONG)}
RESPONSES_BREAKS: dict[str, tuple[Json, ...]] = {
    "model": _MODEL_WRONG,
    "input": (5, None, {}, True, [5]),
    "input.0": (5, "x", None, []),
    "input.0.type": (5, []),
    "input.0.role": (5, "robot", None),
    "input.0.content": (5, {}, True),
    "input.0.content.0": (5, "x", None, {}),
    "input.0.content.0.type": (5, None),
    "input.0.content.0.text": (5, None, []),
    "input.1.call_id": (5, None),
    "input.1.name": (5, None, ""),
    "input.1.arguments": (5, [], True),
    "input.2.call_id": (5, None),
    "input.2.output": (5, {}, True),
    "input.3.encrypted_content": (5, []),
    "instructions": (5, [], {}),
    "max_output_tokens": NUMBERS_WRONG,
    "stream": ("yes", 1),
    "temperature": ("x", True),
    "tools": (7, "x", {}, [5]),
    "tools.0.type": (5, None),
    "tools.0.name": (5, None, ""),
    "tools.0.parameters": (5, "x", []),
    "tool_choice": (5, "x", [], {}),
    "reasoning": (5, "x", []),
    "reasoning.effort": (5, []),
    "parallel_tool_calls": ("x",),
    "user": (5,),
}
WAYS = (
    *("field", "field", "field", "field", "two fields", "missing", "nesting", "duplicate"),
    *("long model", "not an object", "bad json", "bad utf-8"),
)
"""The ways a body is broken; a wrong field, the richest, is drawn most often."""
ENDPOINTS = {
    "/v1/chat/completions": (_chat, CHAT_BREAKS),
    "/v1/responses": (_responses, RESPONSES_BREAKS),
    "/v1/messages": (_messages, MESSAGES_BREAKS | MESSAGES_ONLY_BREAKS),
    "/v1/messages/count_tokens": (_messages, MESSAGES_BREAKS),
}
REQUIRED = {
    "/v1/chat/completions": ("model", "messages"),
    "/v1/responses": ("model", "input"),
    "/v1/messages": ("model", "messages", "max_tokens"),
    "/v1/messages/count_tokens": ("model", "messages"),
}


def _set(body: dict[str, Json], path: str, value: Json) -> bool:
    """Put `value` at `path` (dot-separated keys and indexes); False if the path is gone."""
    *parents, last = path.split(".")
    node: Json = body
    for step in parents:
        if isinstance(node, list) and step.isdigit() and int(step) < len(node):
            node = node[int(step)]
        elif isinstance(node, dict) and step in node:
            node = node[step]
        else:
            return False
    if isinstance(node, list) and last.isdigit() and int(last) < len(node):
        node[int(last)] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        return False
    return True


def _nested(rng: random.Random) -> bytes:
    depth = rng.choice((64, 65, 100, 254, 255, rng.randint(64, 1500)))
    opener, closer = rng.choice(((b"[", b"]"), (b'{"a":', b"}")))
    return opener * depth + b"1" + closer * depth


def _broken(rng: random.Random, path: str, model: str) -> tuple[str, bytes]:
    """One malformed body for `path`, and the name of the way it was broken."""
    make, breaks = ENDPOINTS[path]
    body = make(model)
    way = rng.choice(WAYS)
    if way in ("field", "two fields"):
        for _ in range(1 if way == "field" else 2):
            where = rng.choice(list(breaks))
            _set(body, where, copy.deepcopy(rng.choice(breaks[where])))
        return way, orjson.dumps(body)
    if way == "missing":
        del body[rng.choice(REQUIRED[path])]
        return way, orjson.dumps(body)
    if way == "nesting":
        # Deep inside a field the gateway carries on (a tool schema) or one it never reads.
        if rng.random() < 0.5:
            raw = orjson.dumps(body)
            return way, raw[:-1] + b',"extra":' + _nested(rng) + b"}"
        marker = "__nested__"
        tools = body["tools"][0]
        schema_at = tools.get("function", tools)
        key = next(k for k in ("parameters", "input_schema") if k in schema_at)
        schema_at[key] = {"type": "object", "properties": {"deep": marker}}
        raw = orjson.dumps(body)
        return way, raw.replace(orjson.dumps(marker), _nested(rng))
    if way == "duplicate":
        # The key's first value is fine; the last, which the gateway reads, is not.
        top = [name for name in breaks if "." not in name and name in body]
        name = rng.choice(top)
        wrong = rng.choice([value for value in breaks[name] if value is not None] or [5])
        raw = orjson.dumps(body)
        return way, raw[:-1] + b"," + orjson.dumps(name) + b":" + orjson.dumps(wrong) + b"}"
    if way == "long model":
        body["model"] = "claude-sonnet-" + "x" * rng.randint(243, 20_000)
        return way, orjson.dumps(body)
    if way == "not an object":
        return way, orjson.dumps(rng.choice(([body], "text", 5, None, True, [], 1.5)))
    raw = orjson.dumps(body)
    if way == "bad json":
        cut = rng.randint(0, len(raw) - 1)
        return way, rng.choice(
            (
                raw[:cut],
                b"\xef\xbb\xbf" + raw,
                raw[:-1] + b',"x":NaN}',
                raw[:-1] + b',"x":1e400}',
                raw[:-1] + b',"x":"\\ud800"}',
                raw + b"{}",
                b"",
            )
        )
    at = raw.index(b'"', raw.index(b"model")) + 1  # inside the first string value
    return way, raw[:at] + rng.choice((b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8")) + raw[at:]


def _error_shaped(path: str, response: httpx.Response) -> bool:
    body = response.json()
    if "/messages" in path:
        return (
            body.get("type") == "error"
            and isinstance(body.get("error"), dict)
            and body["error"].get("type") == "invalid_request_error"
            and isinstance(body["error"].get("message"), str)
        )
    error = body.get("error") if set(body) == {"error"} else None
    return isinstance(error, dict) and set(error) == {"message", "type", "param", "code"}


@pytest.fixture
def responses_sim() -> Iterator[SimUpstream]:
    scenario = Scenario.model_validate(
        {
            "name": "responses",
            "api": "responses",
            "auth": {"kind": "bearer", "token": RESPONSES_KEY},
            "models": [{"id": GPT, "context_window": 400000, "max_output_tokens": 8192}],
        }
    )
    with SimUpstream(scenario) as sim:
        yield sim


def _connection(
    connection_id: str, provider: str, auth: str, *, url: str, model: str, folder: Path
) -> dict[str, Json]:
    return {
        "id": connection_id,
        "provider": provider,
        "auth": auth,
        "credential": {"file": str(folder / f"{connection_id}.secret")},
        "base_url": url,
        "models": [model],
    }


def test_thousands_of_malformed_requests_get_400s_and_reach_nothing(
    start_gateway: StartGateway, sims: Upstreams, responses_sim: SimUpstream, tmp_path: Path
) -> None:
    # The standard upstreams (the gateway writes their secrets), and one speaking Responses.
    (tmp_path / "responses.secret").write_text(RESPONSES_KEY)
    connections = [
        _connection(
            "plan", "anthropic", "oauth", url=sims.subscription.url, model=CLAUDE, folder=tmp_path
        ),
        _connection("api", "anthropic", "apikey", url=sims.api.url, model=CLAUDE, folder=tmp_path),
        _connection(
            "cheap",
            "deepseek",
            "apikey",
            url=f"{sims.cheap.url}/v1",
            model=DEEPSEEK,
            folder=tmp_path,
        ),
        _connection(
            "responses",
            "openai-responses",
            "apikey",
            url=f"{responses_sim.url}/v1",
            model=GPT,
            folder=tmp_path,
        ),
    ]
    gateway = start_gateway(
        connections=connections,
        aliases={"claude-sonnet-*": CLAUDE, "fast": DEEPSEEK, "to-responses": GPT},
    )
    rng = random.Random(SEED)
    ways: Counter[str] = Counter()
    statuses: Counter[int] = Counter()
    wrong: list[str] = []
    headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
    with httpx.Client(base_url=gateway.url, headers=headers, timeout=30) as client:
        for _ in range(REQUESTS):
            path = rng.choice(list(ENDPOINTS))
            way, raw = _broken(rng, path, rng.choice(MODELS))
            ways[way] += 1
            response = client.post(path, content=raw)
            statuses[response.status_code] += 1
            if response.status_code != 400 or not _error_shaped(path, response):
                answer = f"{response.status_code} {response.text[:300]}"
                wrong.append(f"{path} {way} {raw[:300]!r} -> {answer}")
    print(f"{REQUESTS} malformed requests: {dict(statuses)}; broken by {dict(ways)}")
    assert wrong == [], f"{len(wrong)} of {REQUESTS} answered wrongly:\n" + "\n".join(wrong[:20])
    assert statuses == {400: REQUESTS}
    assert all(count > 100 for count in ways.values()), ways
    assert gateway.rows() == [], "a malformed request left a ledger row"
    reached = [sim.requests for sim in (*sims.all(), responses_sim) if sim.requests]
    assert reached == [], "a malformed request reached an upstream"
