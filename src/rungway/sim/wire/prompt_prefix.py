"""Where a request's prompt may end a cached prefix, per wire API: its boundaries.

Each builder walks the body once, in the order the provider caches it, serialises each
block once (orjson) and chains a digest through them, so the digest at a boundary names
the whole prompt up to it. The digest is Python's own `hash` (SipHash), the fastest the
standard library has; it is salted per process, which suits a cache that lives in one.
Tokens up to a boundary are the serialised bytes so far over four, the sims' own estimate
(`completion.estimate_input_tokens`), so a prefix is measured in the same tokens as the
prompt.

- Anthropic Messages: tools, then system blocks, then each message's content blocks (a
  string content is one block). `cache_control` marks a breakpoint and is left out of the
  digest, as moving a breakpoint does not change the prefix; a top-level `cache_control`
  marks the last block.
- OpenAI Chat: tools, then each message. Responses: instructions, tools, then each input
  item (a string input is one).
- Gemini: system instruction, tools, then each content.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from rungway.sim.prompt_cache import DEFAULT_TTL_S, ONE_HOUR_S, Boundary

__all__ = [
    "anthropic_boundaries",
    "chat_boundaries",
    "gemini_boundaries",
    "responses_boundaries",
]

_CHARS_PER_TOKEN = 4


class _Chain:
    """A running digest and byte count over a prompt's blocks."""

    __slots__ = ("_digest", "_size", "boundaries")

    def __init__(self) -> None:
        self._digest = 0
        self._size = 0
        self.boundaries: list[Boundary] = []

    def mark(self, label: bytes) -> None:
        """Fold a structural label (a section or a role) into the digest, not a boundary."""
        self._digest = hash((self._digest, label))

    def add(self, block: object, ttl_s: float | None = None) -> None:
        """Fold one block in and end a boundary after it."""
        data = orjson.dumps(block)
        self._digest = hash((self._digest, hash(data)))
        self._size += len(data)
        self.boundaries.append(Boundary(self._digest, self._size // _CHARS_PER_TOKEN, ttl_s))

    def add_all(self, label: bytes, blocks: object) -> None:
        """Fold a section's blocks in, one boundary after each (a lone value is one block)."""
        if blocks is None:
            return
        self.mark(label)
        for block in blocks if isinstance(blocks, list) else (blocks,):
            self.add(block)


def _breakpoint(cache_control: object) -> float | None:
    """The TTL a `cache_control` asks for, or None when it is not a breakpoint."""
    if not isinstance(cache_control, Mapping) or cache_control.get("type") != "ephemeral":
        return None
    return ONE_HOUR_S if cache_control.get("ttl") == "1h" else DEFAULT_TTL_S


def _add_anthropic_blocks(chain: _Chain, blocks: object) -> None:
    items: Iterable[object] = blocks if isinstance(blocks, list) else (blocks,)
    for item in items:
        ttl = None
        block = item
        if isinstance(item, dict) and "cache_control" in item:
            ttl = _breakpoint(item["cache_control"])
            block = {key: value for key, value in item.items() if key != "cache_control"}
        chain.add(block, ttl)


def anthropic_boundaries(body: Mapping[str, Any]) -> tuple[Boundary, ...]:
    """A Messages request's boundaries, breakpoints marked."""
    chain = _Chain()
    if "tools" in body:
        chain.mark(b"tools")
        _add_anthropic_blocks(chain, body["tools"])
    if "system" in body:
        chain.mark(b"system")
        _add_anthropic_blocks(chain, body["system"])
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict):
            continue
        chain.mark(str(message.get("role")).encode())
        _add_anthropic_blocks(chain, message.get("content"))
    boundaries = chain.boundaries
    top = _breakpoint(body.get("cache_control"))
    if top is not None and boundaries and boundaries[-1].breakpoint_ttl_s is None:
        last = boundaries[-1]
        boundaries[-1] = Boundary(last.digest, last.tokens, top)
    return tuple(boundaries)


def chat_boundaries(body: Mapping[str, Any]) -> tuple[Boundary, ...]:
    """A Chat Completions request's boundaries: tools, then each message."""
    chain = _Chain()
    chain.add_all(b"tools", body.get("tools"))
    chain.add_all(b"messages", body.get("messages"))
    return tuple(chain.boundaries)


def responses_boundaries(body: Mapping[str, Any]) -> tuple[Boundary, ...]:
    """A Responses request's boundaries: instructions, tools, then each input item."""
    chain = _Chain()
    chain.add_all(b"instructions", body.get("instructions"))
    chain.add_all(b"tools", body.get("tools"))
    chain.add_all(b"input", body.get("input"))
    return tuple(chain.boundaries)


def gemini_boundaries(body: Mapping[str, Any]) -> tuple[Boundary, ...]:
    """A GenerateContent request's boundaries: system instruction, tools, then each content."""
    chain = _Chain()
    system = body.get("systemInstruction", body.get("system_instruction"))
    chain.add_all(b"system", system)
    chain.add_all(b"tools", body.get("tools"))
    chain.add_all(b"contents", body.get("contents"))
    return tuple(chain.boundaries)
