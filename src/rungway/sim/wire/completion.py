"""The simulated model: what it reads from a request and the deterministic reply it gives.

A "token" here is one word (with its leading space), so output token counts, chunking
and `max_tokens` truncation are exact and reproducible. Input tokens are estimated as
the length of the request's JSON-serialised prompt divided by four (at least 1).

When the scenario lists tools to call (`response.tool_calls`), the model also reads the
request's tools, in whichever wire format it came: a request offering one of them gets a
call to it, and a request whose last turn carries a tool result gets text quoting it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from itertools import cycle, islice
from typing import Any

import orjson

from rungway.sim.scenario import ResponseSpec

# Generated replies cycle through this sentence, one word per token.
_VOCABULARY = (
    "The", "simulated", "upstream", "answers", "with", "a", "fixed", "and", "predictable",
    "reply", "so", "that", "tests,", "demos", "and", "benchmarks", "can", "count", "every",
    "token", "it", "sends", "back", "to", "the", "gateway.",
)  # fmt: skip
QUOTED_RESULT_CHARS = 200
"""How much of a tool result the reply after it quotes."""
RESULT_PREFIX = "The tool returned: "
# Words with the whitespace before them, and any trailing whitespace: joined, they give
# back the exact text, so a quoted tool result survives byte for byte.
_EXACT_WORDS = re.compile(r"\s*\S+|\s+$")
# A stream carries a tool call's arguments in fragments of about this many characters
# per token of `chunk_tokens` (the input estimate's four characters a token).
_CHARS_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class ToolTurn:
    """What a request says about tools: the names it offers (none when `tool_choice`
    forbids calls) and the tool result its last turn carries, if any."""

    offered: frozenset[str] = frozenset()
    result: str | None = None


NO_TOOLS = ToolTurn()


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call the model makes: the tool's name and its arguments as JSON text."""

    name: str
    arguments: str

    @property
    def input(self) -> Any:
        """The arguments, parsed."""
        return orjson.loads(self.arguments)

    def fragments(self, chunk_tokens: int) -> list[str]:
        """The arguments split into stream deltas."""
        size = chunk_tokens * _CHARS_PER_TOKEN
        text = self.arguments
        return [text[i : i + size] for i in range(0, len(text), size)]


@dataclass(frozen=True, slots=True)
class Completion:
    """One generated reply: its text pieces or its tool call, and its usage."""

    pieces: tuple[str, ...]
    input_tokens: int
    truncated: bool
    tool_call: ToolCall | None = None
    quoted_result: str | None = None
    """The part of the request's tool result the text quotes (None when there was none)."""
    cache_read_tokens: int = 0
    """Of `input_tokens`, those read from the account's prompt cache."""
    cache_write_5m_tokens: int = 0
    """Of `input_tokens`, those written to the prompt cache for 5 minutes."""
    cache_write_1h_tokens: int = 0
    """Of `input_tokens`, those written to the prompt cache for 1 hour."""

    @property
    def cache_write_tokens(self) -> int:
        """Of `input_tokens`, those written to the prompt cache."""
        return self.cache_write_5m_tokens + self.cache_write_1h_tokens

    @property
    def uncached_input_tokens(self) -> int:
        """Of `input_tokens`, those neither read from nor written to the prompt cache."""
        return self.input_tokens - self.cache_read_tokens - self.cache_write_tokens

    @property
    def output_tokens(self) -> int:
        """Tokens generated: one per piece, or the tool call's arguments estimate."""
        if self.tool_call is not None:
            return max(1, len(self.tool_call.arguments) // _CHARS_PER_TOKEN)
        return len(self.pieces)

    @property
    def text(self) -> str:
        """The whole reply text (empty for a tool call)."""
        return "".join(self.pieces)

    def chunks(self, chunk_tokens: int) -> list[str]:
        """The reply split into stream deltas of `chunk_tokens` tokens each."""
        pieces = self.pieces
        return ["".join(pieces[i : i + chunk_tokens]) for i in range(0, len(pieces), chunk_tokens)]


def estimate_input_tokens(prompt: object) -> int:
    """Deterministic input-token estimate: serialised JSON length // 4, at least 1."""
    return max(1, len(orjson.dumps(prompt)) // 4)


@lru_cache(maxsize=64)
def _pieces(text: str | None, output_tokens: int) -> tuple[str, ...]:
    words = text.split() if text is not None else list(islice(cycle(_VOCABULARY), output_tokens))
    return tuple(word if index == 0 else " " + word for index, word in enumerate(words))


def _capped(
    pieces: tuple[str, ...], input_tokens: int, max_tokens: int | None, quoted: str | None = None
) -> Completion:
    truncated = max_tokens is not None and len(pieces) > max_tokens
    if truncated:
        pieces = pieces[:max_tokens]
    return Completion(pieces, input_tokens, truncated, quoted_result=quoted)


def plan_completion(
    spec: ResponseSpec, input_tokens: int, max_tokens: int | None, tools: ToolTurn = NO_TOOLS
) -> Completion:
    """The reply to a request with this input size, output cap and tool turn."""
    if spec.tool_calls:
        if tools.result is not None:
            quoted = tools.result[:QUOTED_RESULT_CHARS]
            pieces = tuple(_EXACT_WORDS.findall(RESULT_PREFIX + quoted))
            return _capped(pieces, input_tokens, max_tokens, quoted)
        for call in spec.tool_calls:
            if call.name in tools.offered:
                arguments = orjson.dumps(call.input).decode()
                return Completion((), input_tokens, False, ToolCall(call.name, arguments))
    return _capped(_pieces(spec.text, spec.output_tokens), input_tokens, max_tokens)


# --- Reading tools from each wire format ---------------------------------------------------


def _text_of(content: object) -> str:
    # A tool result is a string or a list of parts; the text parts are what it says.
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def _names(tools: object, nested: bool = False) -> frozenset[str]:
    names: set[str] = set()
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict):
            continue
        # Chat Completions nests the function under `function`; the others are flat.
        entry = tool.get("function") if nested else tool
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            names.add(entry["name"])
    return frozenset(names)


def _last(items: object) -> dict[str, Any]:
    if isinstance(items, list) and items and isinstance(items[-1], dict):
        return items[-1]
    return {}


def anthropic_tool_turn(body: Mapping[str, Any]) -> ToolTurn:
    """Tools of a Messages request: `tools[].name`, `tool_result` blocks in the last turn."""
    choice = body.get("tool_choice")
    forbidden = isinstance(choice, dict) and choice.get("type") == "none"
    offered = frozenset() if forbidden else _names(body.get("tools"))
    last = _last(body.get("messages"))
    content = last.get("content") if last.get("role") == "user" else None
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type") == "tool_result":
            return ToolTurn(offered, _text_of(block.get("content")))
    return ToolTurn(offered)


def chat_tool_turn(body: Mapping[str, Any]) -> ToolTurn:
    """Tools of a Chat Completions request: `tools[].function.name`, a last `tool` message."""
    forbidden = body.get("tool_choice") == "none"
    offered = frozenset() if forbidden else _names(body.get("tools"), nested=True)
    last = _last(body.get("messages"))
    if last.get("role") == "tool":
        return ToolTurn(offered, _text_of(last.get("content")))
    return ToolTurn(offered)


def responses_tool_turn(body: Mapping[str, Any]) -> ToolTurn:
    """Tools of a Responses request: function `tools[].name`, a last `*_call_output` item."""
    forbidden = body.get("tool_choice") == "none"
    tools = body.get("tools")
    functions = [
        tool
        for tool in (tools if isinstance(tools, list) else ())
        if isinstance(tool, dict) and tool.get("type") == "function"
    ]
    offered = frozenset() if forbidden else _names(functions)
    last = _last(body.get("input"))
    if last.get("type") in ("function_call_output", "custom_tool_call_output"):
        return ToolTurn(offered, _text_of(last.get("output")))
    return ToolTurn(offered)
