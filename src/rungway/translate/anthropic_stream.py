"""Anthropic Messages answers, both ways: complete replies and streams.

The reply functions read an Anthropic upstream's message and write one for an Anthropic
client; the tool ids, thinking blocks, stop reasons and usage they write are the same as
the stream's. The stream reader turns an Anthropic upstream's SSE events into canonical
events; the writer turns canonical events from another API's upstream into the SSE frames
an Anthropic client expects:
`message_start` first, blocks numbered 0, 1, 2, ... and closed before the next opens, and
`message_delta` held back until the usage is known (an OpenAI usage chunk comes after the
finish reason).
"""

from __future__ import annotations

import re
from typing import Any, Literal

import orjson

from rungway.protocol.sse import SseEvent, encode_event
from rungway.protocol.usage import CountReader
from rungway.translate.canonical import (
    AFTER_THE_FINISH,
    ArgumentsDelta,
    BlockStarted,
    BlockStopped,
    CanonicalUsage,
    Ended,
    Event,
    Finished,
    Reply,
    Request,
    Started,
    Stop,
    StreamError,
    Text,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolCall,
    UsageReported,
)

STOP_REASONS = {
    "end_turn": Stop.END,
    "max_tokens": Stop.LENGTH,
    "model_context_window_exceeded": Stop.LENGTH,
    "tool_use": Stop.TOOL_USE,
    "stop_sequence": Stop.STOP_SEQUENCE,
    "refusal": Stop.FILTERED,
    "pause_turn": Stop.PAUSED,
}
"""Anthropic's `stop_reason` values as canonical stops; any other value reads as END."""

STOP_REASON_NAMES = {
    Stop.END: "end_turn",
    Stop.LENGTH: "max_tokens",
    Stop.TOOL_USE: "tool_use",
    Stop.STOP_SEQUENCE: "stop_sequence",
    Stop.FILTERED: "refusal",
    Stop.PAUSED: "pause_turn",
}
"""The `stop_reason` an Anthropic client gets for each canonical stop."""

_ERROR_KINDS: dict[str, Literal["overloaded", "rate_limited"]] = {
    "overloaded_error": "overloaded",
    "rate_limit_error": "rate_limited",
}
_ERROR_TYPES = {"overloaded": "overloaded_error", "rate_limited": "rate_limit_error"}

# Anthropic rejects tool_use ids outside this alphabet; other upstreams make ids such as
# `functions.get_weather:0`. https://docs.anthropic.com/en/api/messages (tool_use.id)
_BAD_ID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


def tool_use_id(call_id: str | None) -> str:
    """`call_id` as an id Anthropic accepts (`^[a-zA-Z0-9_-]+$`), the same every time."""
    if not call_id:
        return "toolu_missing"
    return _BAD_ID_CHARS.sub("_", call_id)


def message_id(reply_id: str) -> str:
    """A `msg_` id for a reply id from any upstream: `chatcmpl-x` becomes `msg_chatcmpl-x`."""
    if reply_id.startswith("msg_"):
        return reply_id
    return f"msg_{reply_id or 'rungway'}"


def read_usage(usage: dict[str, Any] | None) -> CanonicalUsage:
    """An Anthropic `usage` object as canonical usage (its `input_tokens` excludes cache)."""
    if not isinstance(usage, dict):
        return CanonicalUsage()
    counts = CountReader()
    count = counts.read
    return CanonicalUsage(
        input_tokens=count(usage, "input_tokens"),
        output_tokens=count(usage, "output_tokens"),
        cache_read_tokens=count(usage, "cache_read_input_tokens"),
        cache_write_tokens=count(usage, "cache_creation_input_tokens"),
        invalid=counts.invalid,
    )


def usage_fields(usage: CanonicalUsage) -> dict[str, int]:
    """Canonical usage as Anthropic's four counters (reasoning is inside output_tokens)."""
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
    }


def read_reply(body: dict[str, Any]) -> Reply:
    """An Anthropic upstream's message as a canonical reply."""
    content = body.get("content")
    if not isinstance(content, list):
        raise ValueError("reply: `content` missing; not an Anthropic message")
    parts: list[Text | ToolCall | Thinking] = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append(Text(block.get("text", "")))
        elif kind == "tool_use":
            arguments = orjson.dumps(block.get("input", {})).decode()
            parts.append(ToolCall(block.get("id", ""), block.get("name", ""), arguments))
        elif kind in ("thinking", "redacted_thinking"):
            parts.append(read_thinking_block(block))
    return Reply(
        id=body.get("id", ""),
        model=body.get("model", ""),
        parts=tuple(parts),
        stop=STOP_REASONS.get(body.get("stop_reason") or "", Stop.END),
        stop_sequence=body.get("stop_sequence"),
        usage=read_usage(body.get("usage")),
    )


def write_reply(reply: Reply, model: str) -> dict[str, Any]:
    """The Messages reply an Anthropic client gets for `reply` (`model` when it has none)."""
    content: list[dict[str, Any]] = []
    for part in reply.parts:
        if isinstance(part, Text) and part.text.strip():  # blank text could not go back
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolCall):
            content.append(tool_use_block(part))
        elif isinstance(part, Thinking) and part.origin == "anthropic" and part.redacted:
            content.append({"type": "redacted_thinking", "data": part.redacted})
        elif isinstance(part, Thinking) and (
            part.text or (part.signature and part.origin == "anthropic")
        ):
            # Only Anthropic's own signature is kept; anything else goes out unsigned, so
            # the client's next request never presents it to Anthropic as signed.
            signature = part.signature if part.origin == "anthropic" else None
            content.append(
                {"type": "thinking", "thinking": part.text, "signature": signature or ""}
            )
    return {
        "id": message_id(reply.id),
        "type": "message",
        "role": "assistant",
        "model": reply.model or model,
        "content": content,
        "stop_reason": STOP_REASON_NAMES[reply.stop],
        "stop_sequence": reply.stop_sequence,
        "usage": usage_fields(reply.usage),
    }


def read_thinking_block(block: dict[str, Any]) -> Thinking:
    """A `thinking` or `redacted_thinking` block; unsigned thinking has no origin."""
    if block.get("type") == "redacted_thinking":
        return Thinking("", redacted=block.get("data"), origin="anthropic")
    # A thinking block with no signature came from another provider through the gateway:
    # it must never be sent to Anthropic as if it were signed.
    signature = block.get("signature") or None
    origin: Literal["anthropic"] | None = "anthropic" if signature else None
    return Thinking(str(block.get("thinking", "")), signature=signature, origin=origin)


def tool_use_block(call: ToolCall) -> dict[str, Any]:
    """A `tool_use` block for `call`, its input an object whatever the arguments were."""
    return {
        "type": "tool_use",
        "id": tool_use_id(call.id),
        "name": call.name,
        "input": arguments_object(call.arguments),
    }


def arguments_object(arguments: str) -> dict[str, Any]:
    """The arguments' JSON object; `{}` for empty, malformed or non-object arguments."""
    try:
        value = orjson.loads(arguments) if arguments.strip() else {}
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


class AnthropicStreamReader:
    """Reads one Anthropic upstream stream into canonical events.

    Blocks the canonical form cannot carry (server tool calls and results) are skipped, so
    the canonical indexes of the rest stay contiguous.
    """

    def __init__(self) -> None:
        self._indexes: dict[int, int] = {}
        self._start_usage: dict[str, Any] = {}

    def read(self, event: SseEvent) -> list[Event]:
        """The canonical events one Anthropic SSE event carries."""
        try:
            data = orjson.loads(event.data) if event.data else {}
        except orjson.JSONDecodeError:
            return [StreamError("server", f"unreadable {event.event or 'stream'} event")]
        if not isinstance(data, dict):
            return []
        kind = data.get("type") or event.event
        if kind == "message_start":
            return self._message_start(data.get("message") or {})
        if kind == "content_block_start":
            return self._block_start(data.get("index"), data.get("content_block") or {})
        if kind == "content_block_delta":
            return self._block_delta(data.get("index"), data.get("delta") or {})
        if kind == "content_block_stop":
            index = self._indexes.get(data.get("index", -1))
            return [] if index is None else [BlockStopped(index)]
        if kind == "message_delta":
            return self._message_delta(data.get("delta") or {}, data.get("usage") or {})
        if kind == "message_stop":
            return [Ended()]
        if kind == "error":
            error = data.get("error") or {}
            return [
                StreamError(
                    _ERROR_KINDS.get(error.get("type", ""), "server"),
                    str(error.get("message") or "upstream stream error"),
                )
            ]
        return []  # ping, and event types newer than this reader

    def _message_start(self, message: dict[str, Any]) -> list[Event]:
        self._start_usage = dict(message.get("usage") or {})
        # message_start's output_tokens is a placeholder; the real count comes at the end.
        usage = read_usage({**self._start_usage, "output_tokens": 0})
        return [Started(id=message.get("id", ""), model=message.get("model", ""), usage=usage)]

    def _block_start(self, wire_index: Any, block: dict[str, Any]) -> list[Event]:
        kind = block.get("type")
        index = len(self._indexes)
        events: list[Event] = []
        if kind == "text":
            events.append(BlockStarted(index, "text"))
            if block.get("text"):
                events.append(TextDelta(index, block["text"]))
        elif kind == "tool_use":
            events.append(BlockStarted(index, "tool_call", block.get("id"), block.get("name")))
            if block.get("input"):
                events.append(ArgumentsDelta(index, orjson.dumps(block["input"]).decode()))
        elif kind in ("thinking", "redacted_thinking"):
            # A redacted block's opaque data has no place in stream events; the writers
            # that read these events drop it anyway.
            events.append(BlockStarted(index, "thinking"))
            if block.get("thinking"):
                events.append(ThinkingDelta(index, block["thinking"]))
            if block.get("signature"):
                events.append(ThinkingDelta(index, signature=block["signature"]))
        else:
            return []
        self._indexes[wire_index] = index
        return events

    def _block_delta(self, wire_index: Any, delta: dict[str, Any]) -> list[Event]:
        index = self._indexes.get(wire_index)
        if index is None:
            return []
        kind = delta.get("type")
        if kind == "text_delta" and delta.get("text"):
            return [TextDelta(index, delta["text"])]
        if kind == "input_json_delta" and delta.get("partial_json"):
            return [ArgumentsDelta(index, delta["partial_json"])]
        if kind == "thinking_delta" and delta.get("thinking"):
            return [ThinkingDelta(index, delta["thinking"])]
        if kind == "signature_delta" and delta.get("signature"):
            return [ThinkingDelta(index, signature=delta["signature"])]
        return []

    def _message_delta(self, delta: dict[str, Any], usage: dict[str, Any]) -> list[Event]:
        events: list[Event] = []
        reason = delta.get("stop_reason")
        if reason is not None:
            events.append(Finished(STOP_REASONS.get(reason, Stop.END), delta.get("stop_sequence")))
        # message_delta's counts are cumulative; the input side may be left out, in which
        # case message_start's values stand.
        merged = {**self._start_usage, "output_tokens": 0}
        merged.update({key: value for key, value in usage.items() if value is not None})
        events.append(UsageReported(read_usage(merged)))
        return events


class AnthropicStreamWriter:
    """Writes canonical events as an Anthropic Messages SSE stream for one client.

    A tool block is opened only once its name is known: a reader that learns the name late
    may repeat `BlockStarted` for the same index with the name, and the arguments that came
    before it are held until then. Signatures in thinking deltas are dropped: this writer
    serves streams from other providers, whose signatures Anthropic would reject.
    """

    def __init__(self, request: Request) -> None:
        self._model = request.model
        self._started = False
        self._done = False
        self._wire: dict[int, int] = {}  # canonical index -> wire index of its block
        self._seen: set[int] = set()
        self._open: int | None = None
        self._pending: dict[int, tuple[BlockStarted, list[str]]] = {}  # nameless tool blocks
        self._usage = CanonicalUsage()
        self._finished: Finished | None = None

    def write(self, event: Event) -> bytes:
        """The SSE frames for `event`, or b"" while holding back or after the end."""
        if self._done:
            return b""
        if isinstance(event, StreamError):
            self._done = True
            error_type = _ERROR_TYPES.get(event.kind, "api_error")
            payload = {"type": "error", "error": {"type": error_type, "message": event.message}}
            return encode_event(payload, "error")
        if isinstance(event, Started):
            return self._start(event)
        if self._finished is not None and isinstance(event, AFTER_THE_FINISH):
            return b""  # the model has stopped: what an upstream sends after is not the reply
        out = b"" if self._started else self._start(Started(id="", model=self._model))
        if isinstance(event, BlockStarted):
            return out + self._block_started(event)
        if isinstance(event, TextDelta | ArgumentsDelta | ThinkingDelta):
            return out + self._delta(event)
        if isinstance(event, BlockStopped):
            out += self._release(event.index)
            return out + (self._close() if event.index == self._open else b"")
        if isinstance(event, Finished):
            self._finished = event
            return out + self._release_all() + self._close()
        if isinstance(event, UsageReported):
            self._usage = event.usage
            return out + (self._finish() if self._finished else b"")
        return out + self._finish()  # Ended: flush whatever is held

    def _start(self, event: Started) -> bytes:
        if self._started:
            return b""
        self._started = True
        if event.usage is not None:
            self._usage = event.usage
        usage = {**usage_fields(self._usage), "output_tokens": 1}  # placeholder, as upstream
        message: dict[str, Any] = {
            "id": message_id(event.id),
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": event.model or self._model,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        return encode_event({"type": "message_start", "message": message}, "message_start")

    def _block_started(self, event: BlockStarted) -> bytes:
        held = self._pending.pop(event.index, None)
        if held is not None:
            first, arguments = held
            event = BlockStarted(
                event.index, "tool_call", event.call_id or first.call_id, event.name
            )
            if not event.name:
                self._pending[event.index] = (event, arguments)
                return b""
            return self._open_block(event) + b"".join(
                self._delta(ArgumentsDelta(event.index, text)) for text in arguments
            )
        if event.index in self._seen:
            return b""  # a repeated start: the block is already open or done
        self._seen.add(event.index)
        if event.kind == "tool_call" and not event.name:
            self._pending[event.index] = (event, [])
            return b""
        return self._open_block(event)

    def _open_block(self, event: BlockStarted) -> bytes:
        out = self._close()
        index = len(self._wire)
        self._wire[event.index] = index
        self._open = event.index
        block: dict[str, Any]
        if event.kind == "text":
            block = {"type": "text", "text": ""}
        elif event.kind == "tool_call":
            # The client's accumulated input starts as {}, so a call with no argument
            # deltas still parses.
            call_id = tool_use_id(event.call_id)
            block = {"type": "tool_use", "id": call_id, "name": event.name or "", "input": {}}
        else:
            block = {"type": "thinking", "thinking": "", "signature": ""}
        frame = {"type": "content_block_start", "index": index, "content_block": block}
        return out + encode_event(frame, "content_block_start")

    def _delta(self, event: TextDelta | ArgumentsDelta | ThinkingDelta) -> bytes:
        kind: Literal["text", "tool_call", "thinking"]
        if isinstance(event, TextDelta):
            kind, delta, text = "text", {"type": "text_delta", "text": event.text}, event.text
        elif isinstance(event, ArgumentsDelta):
            kind, text = "tool_call", event.json
            delta = {"type": "input_json_delta", "partial_json": event.json}
        else:
            kind, text = "thinking", event.text
            delta = {"type": "thinking_delta", "thinking": event.text}
        if not text:
            return b""
        if event.index in self._pending:
            self._pending[event.index][1].append(text)
            return b""
        out = b""
        if event.index != self._open:
            if kind == "tool_call" and event.index in self._seen:
                return b""  # arguments for a tool block already closed cannot be added
            # A delta with no open block of its own (never started, or closed when
            # another began) opens a new block of its kind.
            self._seen.add(event.index)
            out = self._open_block(BlockStarted(event.index, kind))
        frame = {"type": "content_block_delta", "index": self._wire[event.index], "delta": delta}
        return out + encode_event(frame, "content_block_delta")

    def _release(self, index: int) -> bytes:
        """Open a tool block still waiting for its name, as it is: the call is over."""
        held = self._pending.pop(index, None)
        if held is None:
            return b""
        event, arguments = held
        return self._open_block(event) + b"".join(
            self._delta(ArgumentsDelta(index, text)) for text in arguments
        )

    def _release_all(self) -> bytes:
        return b"".join(self._release(index) for index in sorted(self._pending))

    def _close(self) -> bytes:
        if self._open is None:
            return b""
        index = self._wire[self._open]
        self._open = None
        return encode_event({"type": "content_block_stop", "index": index}, "content_block_stop")

    def _finish(self) -> bytes:
        self._done = True
        finished = self._finished or Finished(Stop.END)
        delta = {
            "stop_reason": STOP_REASON_NAMES[finished.stop],
            "stop_sequence": finished.stop_sequence,
        }
        frame = {"type": "message_delta", "delta": delta, "usage": usage_fields(self._usage)}
        return (
            self._release_all()
            + self._close()
            + encode_event(frame, "message_delta")
            + encode_event({"type": "message_stop"}, "message_stop")
        )
