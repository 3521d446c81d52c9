"""Which stream events carry something a user would see, per API.

A stream is committed to the client by its first such event: text, thinking text, a tool
call's name or arguments, a refusal. Everything before it (a message start, an empty
opening block or chunk, a ping, an added output item with nothing in it yet, usage, a
stop reason) can be held back, so a stream that fails there can still fall through to
another connection unseen. Each function reads one event's data and is only asked until
the first visible event has passed.
"""

from __future__ import annotations

from typing import Any

import orjson

_ANTHROPIC_DELTA_TEXT = ("text", "thinking", "partial_json")
_CHAT_DELTA_TEXT = ("content", "refusal", "reasoning_content", "reasoning")


def anthropic(name: str | None, data: bytes) -> bool:
    """A Messages event: a block or delta with text, thinking, tool input or a tool name."""
    if name == "content_block_delta":
        delta = _object(data).get("delta")
        if not isinstance(delta, dict):
            return False
        if delta.get("type") == "citations_delta":
            return True
        return any(bool(delta.get(field)) for field in _ANTHROPIC_DELTA_TEXT)
    if name == "content_block_start":
        block = _object(data).get("content_block")
        if not isinstance(block, dict):
            return False
        # A tool call shows its name from its first event; a text or thinking block
        # opens empty, and its text comes in the deltas.
        return any(bool(block.get(field)) for field in ("name", "text", "thinking"))
    return False


def chat(data: bytes) -> bool:
    """A Chat Completions chunk whose delta carries text, thinking or a tool call.

    Data that is not a JSON object is shown to the client as it is, so it counts.
    """
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        return True
    if not isinstance(chunk, dict):
        return True
    choices = chunk.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            continue
        if any(bool(delta.get(field)) for field in _CHAT_DELTA_TEXT):
            return True
        calls = delta.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            if isinstance(call, dict) and _call_shown(call.get("function")):
                return True
        if _call_shown(delta.get("function_call")):
            return True
    return False


def responses(kind: str, data: bytes) -> bool:
    """A Responses event: a non-empty delta, or an item or part that already holds some."""
    if kind.endswith(".delta"):
        return bool(_object(data).get("delta"))
    if kind.startswith("response.output_item."):
        return _item_shown(_object(data).get("item"))
    if kind.startswith("response.content_part."):
        return _part_shown(_object(data).get("part"))
    return False


def _object(data: bytes) -> dict[str, Any]:
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _call_shown(function: object) -> bool:
    if not isinstance(function, dict):
        return False
    return bool(function.get("name")) or bool(function.get("arguments"))


def _item_shown(item: object) -> bool:
    if not isinstance(item, dict):
        return False
    if bool(item.get("name")) or bool(item.get("arguments")):
        return True
    for field in ("content", "summary"):
        parts = item.get(field)
        if isinstance(parts, list) and any(_part_shown(part) for part in parts):
            return True
    return False


def _part_shown(part: object) -> bool:
    return isinstance(part, dict) and (bool(part.get("text")) or bool(part.get("refusal")))
