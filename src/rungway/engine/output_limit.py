"""A request asking for more output than the routed model allows, retried within its limit.

Clients set their output limit for the model they think they are talking to (Claude Code
asks for 32,000 tokens); a rung further up may serve a model that allows fewer. Upstreams
refuse that with a 400 naming their limit, in words of their own:

- OpenAI:    "... This model supports at most 8192 completion tokens ..."
- Anthropic: "max_tokens: 32000 > 8192, which is the maximum allowed number of output tokens"
- DeepSeek:  "... the valid range of max_tokens is [1, 8192]"
- Gemini:    "... maxOutputTokens value of 100000 but the supported range is from 1
             (inclusive) to 65537 (exclusive) ..."

The engine then sends the same request once more to the same connection, asking for that
limit, which is all the model could have produced anyway.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import orjson

from rungway.engine.call import Call
from rungway.protocol.api import Api

_LIMIT = re.compile(
    r"at most (\d+) (?:completion|output) tokens"
    r"|> (\d+), which is the maximum"
    r"|valid range of max_tokens is \[\d+, ?(\d+)\]"
)
_EXCLUSIVE = re.compile(r"supported range is from \d+ \(inclusive\) to (\d+) \(exclusive\)")

_OUTPUT_FIELDS: dict[Api, tuple[tuple[str, ...], ...]] = {
    Api.ANTHROPIC_MESSAGES: (("max_tokens",),),
    Api.OPENAI_CHAT: (("max_completion_tokens",), ("max_tokens",)),
    Api.OPENAI_RESPONSES: (("max_output_tokens",),),
    # Google's API takes the snake_case spelling too.
    Api.GEMINI: (
        ("generation_config", "max_output_tokens"),
        ("generationConfig", "maxOutputTokens"),
    ),
}
"""Where each API's request holds its output limit, as paths of keys: the one the request
uses, else the last is set."""


def output_limit_in(message: str) -> int | None:
    """The output limit an upstream's refusal names, if it names one."""
    found = _LIMIT.search(message)
    if found is not None:
        return int(next(group for group in found.groups() if group is not None))
    exclusive = _EXCLUSIVE.search(message)
    return int(exclusive.group(1)) - 1 if exclusive is not None else None


def within_output_limit(call: Call, limit: int) -> Call | None:
    """`call` asking for at most `limit` output tokens, or None if it already does."""
    paths = _OUTPUT_FIELDS[call.api]
    path = next((path for path in paths if _get(call.body, path) is not None), paths[-1])
    asked = _get(call.body, path)
    if isinstance(asked, int) and asked <= limit:
        return None
    body = _set(call.body, path, limit)
    return dataclasses.replace(call, body=body, raw_body=orjson.dumps(body))


def _get(body: dict[str, Any], path: tuple[str, ...]) -> object:
    node: object = body
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _set(body: dict[str, Any], path: tuple[str, ...], value: int) -> dict[str, Any]:
    """A copy of `body` with `value` at `path`, copying only the objects on the way."""
    head, *rest = path
    if not rest:
        return {**body, head: value}
    inner = body.get(head)
    return {**body, head: _set(inner if isinstance(inner, dict) else {}, tuple(rest), value)}
