"""A request asking for more output than the routed model allows, retried within its limit.

Clients set their output limit for the model they think they are talking to (Claude Code
asks for 32,000 tokens); a rung further up may serve a model that allows fewer. Upstreams
refuse that with a 400 naming their limit, in words of their own:

- OpenAI:    "... This model supports at most 8192 completion tokens ..."
- Anthropic: "max_tokens: 32000 > 8192, which is the maximum allowed number of output tokens"
- DeepSeek:  "... the valid range of max_tokens is [1, 8192]"

The engine then sends the same request once more to the same connection, asking for that
limit, which is all the model could have produced anyway.
"""

from __future__ import annotations

import dataclasses
import re

import orjson

from rungway.engine.call import Call
from rungway.protocol.api import Api

_LIMIT = re.compile(
    r"at most (\d+) (?:completion|output) tokens"
    r"|> (\d+), which is the maximum"
    r"|valid range of max_tokens is \[\d+, ?(\d+)\]"
)
_OUTPUT_FIELDS = {
    Api.ANTHROPIC_MESSAGES: ("max_tokens",),
    Api.OPENAI_CHAT: ("max_completion_tokens", "max_tokens"),
    Api.OPENAI_RESPONSES: ("max_output_tokens",),
}


def output_limit_in(message: str) -> int | None:
    """The output limit an upstream's refusal names, if it names one."""
    found = _LIMIT.search(message)
    if found is None:
        return None
    return int(next(group for group in found.groups() if group is not None))


def within_output_limit(call: Call, limit: int) -> Call | None:
    """`call` asking for at most `limit` output tokens, or None if it already does."""
    fields = _OUTPUT_FIELDS[call.api]
    name = next((field for field in fields if field in call.body), fields[-1])
    asked = call.body.get(name)
    if isinstance(asked, int) and asked <= limit:
        return None
    body = {**call.body, name: limit}
    return dataclasses.replace(call, body=body, raw_body=orjson.dumps(body))
