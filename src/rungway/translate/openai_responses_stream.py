"""OpenAI Responses streams: an upstream's events to canonical ones, and back for a client.

A client such as a coding agent builds messages and tool calls from each complete
`response.output_item.done` item and reads ids and usage only from the terminal
`response.completed`, so the writer always sends both. The response object and item
shapes here are shared with the non-streamed replies in `openai_responses`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from rungway.protocol import json_values
from rungway.protocol.failures import FailureClass
from rungway.protocol.openai_responses import (
    function_call_item,
    function_tool,
    message_item,
    message_text,
    reasoning_item,
    reasoning_text,
    response_error,
    response_object,
    responses_id,
    tool_choice,
    usage_object,
)
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
    Request,
    Started,
    Stop,
    StreamError,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolNamed,
    UsageReported,
)
from rungway.translate.names import restore_tool_name

ANTHROPIC_SIGNATURE = "rungway.anthropic.signature:"
"""Marks a reasoning item's `encrypted_content` that carries an Anthropic thinking signature.

A Responses client keeps reasoning items and sends them back unchanged, so an Anthropic
upstream's signed thinking can ride along to the next turn, where the request reader
restores it (origin `anthropic`) and only the Anthropic writer sends it on.
"""

ANTHROPIC_REDACTED = "rungway.anthropic.redacted:"
"""Marks a reasoning item's `encrypted_content` that carries Anthropic redacted thinking."""


def read_usage(usage: object) -> CanonicalUsage:
    """Canonical usage for a response's `usage`: cached tokens are taken out of the input."""
    if not isinstance(usage, dict):
        return CanonicalUsage()
    details = json_values.mapping(usage.get("input_tokens_details"))
    counts = CountReader()
    count = counts.read
    cached = count(details, "cached_tokens")
    writes = count(details, "cache_write_tokens")
    return CanonicalUsage(
        input_tokens=max(count(usage, "input_tokens") - cached - writes, 0),
        output_tokens=count(usage, "output_tokens"),
        cache_read_tokens=cached,
        cache_write_tokens=writes,
        reasoning_tokens=count(
            json_values.mapping(usage.get("output_tokens_details")), "reasoning_tokens"
        ),
        invalid=counts.invalid,
    )


def write_usage(usage: CanonicalUsage) -> dict[str, Any]:
    """A response's `usage` for canonical usage: the input counts its cached tokens again."""
    return usage_object(
        input_tokens=usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
        cached=usage.cache_read_tokens,
        cache_writes=usage.cache_write_tokens,
        output_tokens=usage.output_tokens,
        reasoning=usage.reasoning_tokens,
    )


def read_stop(response: dict[str, Any], *, tool_called: bool) -> Stop:
    """Why a response stopped, from its status and `incomplete_details`."""
    if response.get("status") == "incomplete":
        reason = (response.get("incomplete_details") or {}).get("reason")
        return Stop.FILTERED if reason == "content_filter" else Stop.LENGTH
    return Stop.TOOL_USE if tool_called else Stop.END


def incomplete_reason(stop: Stop) -> str | None:
    """The `incomplete_details.reason` for a stop that leaves a response incomplete."""
    return {Stop.LENGTH: "max_output_tokens", Stop.FILTERED: "content_filter"}.get(stop)


def read_thinking(item: dict[str, Any]) -> Thinking:
    """A reasoning item as thinking; its opaque content stays with the family that made it."""
    text = reasoning_text(item)
    carried = item.get("encrypted_content")
    if not isinstance(carried, str) or not carried:
        return Thinking(text, origin="openai")
    if carried.startswith(ANTHROPIC_SIGNATURE):
        return Thinking(
            text, signature=carried.removeprefix(ANTHROPIC_SIGNATURE), origin="anthropic"
        )
    if carried.startswith(ANTHROPIC_REDACTED):
        return Thinking(text, redacted=carried.removeprefix(ANTHROPIC_REDACTED), origin="anthropic")
    # OpenAI's encrypted reasoning: only the Responses request writer may send it back.
    return Thinking(text, signature=carried, origin="openai")


def reasoning_output(item_id: str, thinking: Thinking, status: str = "completed") -> dict[str, Any]:
    """A reasoning output item for a client, carrying any signature in `encrypted_content`."""
    # Another family's signature (Gemini's) would come back read as OpenAI's: it is dropped.
    carried = thinking.signature if thinking.origin == "openai" else None
    if thinking.origin == "anthropic":
        if thinking.signature:
            carried = ANTHROPIC_SIGNATURE + thinking.signature
        elif thinking.redacted:
            carried = ANTHROPIC_REDACTED + thinking.redacted
    return reasoning_item(item_id, thinking.text, carried, status)


def instructions(request: Request) -> str | None:
    """The request's system text as one `instructions` string, or None when it has none."""
    return "\n\n".join(part.text for part in request.system) or None


def request_echo(request: Request) -> dict[str, Any]:
    """The request settings a response object repeats back to its client."""
    echo: dict[str, Any] = {
        "instructions": instructions(request),
        "tools": [function_tool(t.name, t.description, t.parameters) for t in request.tools],
        "temperature": request.temperature,
        "top_p": request.top_p,
        "max_output_tokens": request.max_tokens,
    }
    if request.parallel_tool_calls is not None:
        echo["parallel_tool_calls"] = request.parallel_tool_calls
    if request.tool_choice is not None:
        choice = request.tool_choice
        echo["tool_choice"] = (
            tool_choice(name=choice.name) if isinstance(choice, ToolNamed) else tool_choice(choice)
        )
    return echo


# An upstream failure's code (or type) to the canonical failure kind; any other is `server`.
_ERROR_KINDS: dict[str, Any] = {
    "rate_limit_exceeded": "rate_limited",
    "usage_limit_reached": "rate_limited",
    "server_is_overloaded": "overloaded",
    "slow_down": "overloaded",
    "context_length_exceeded": "context",
    "insufficient_quota": "billing",
    "usage_not_included": "billing",
    "invalid_prompt": "bad_request",
}

_FAILURE_CLASSES = {
    "overloaded": FailureClass.OVERLOADED,
    "rate_limited": FailureClass.RATE_LIMITED,
    "server": FailureClass.SERVER,
    "bad_request": FailureClass.BAD_REQUEST,
    "auth": FailureClass.AUTH,
    "billing": FailureClass.BILLING,
    "context": FailureClass.CONTEXT_TOO_LONG,
}

_BLOCK_KINDS: dict[str, Any] = {"message": "text", "function_call": "tool_call"}
_ITEM_KINDS = frozenset({"message", "function_call", "reasoning"})


def stream_error(error: object) -> StreamError:
    """The canonical error for an upstream's `error` object (or top-level error event)."""
    fields = error if isinstance(error, dict) else {}
    kind = _ERROR_KINDS.get(str(fields.get("code")), _ERROR_KINDS.get(str(fields.get("type"))))
    message = fields.get("message")
    text = message if isinstance(message, str) and message else "upstream stream error"
    return StreamError(kind or "server", text)


@dataclass(slots=True)
class _Item:
    """One upstream output item, as the reader has seen it so far."""

    kind: str
    index: int | None = None
    """Its canonical block index, once the block has started."""
    deltas: bool = False
    summary_index: int = 0
    stopped: bool = False


class ResponsesStreamReader:
    """Reads one Responses upstream stream into canonical events.

    Text and reasoning blocks start at their first delta, so an empty item makes no block;
    an item that arrives whole in `response.output_item.done` is read from there. OpenAI's
    encrypted reasoning is not passed on: thinking deltas carry no origin, and the clients
    such a stream is written for (Chat, Anthropic) could not use it.
    """

    def __init__(self, request: Request) -> None:
        self._request = request
        self._items: dict[int, _Item] = {}
        self._next_block = 0
        self._tool_called = False

    def read(self, event: SseEvent) -> list[Event]:
        """The canonical events one upstream event carries."""
        try:
            data = orjson.loads(event.data)
        except orjson.JSONDecodeError:
            return []
        if not isinstance(data, dict):
            return []
        kind = data.get("type") or event.event
        if kind == "response.created":
            response = data.get("response") or {}
            return [
                Started(
                    id=str(response.get("id") or ""),
                    model=str(response.get("model") or self._request.model),
                    created=int(response.get("created_at") or 0),
                )
            ]
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            return self._delta(data, "message")
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return self._delta(data, "reasoning")
        if kind == "response.function_call_arguments.delta":
            item = self._items.get(_index(data))
            if item is None or item.index is None or item.stopped or not data.get("delta"):
                return []
            item.deltas = True
            return [ArgumentsDelta(item.index, str(data["delta"]))]
        if kind == "response.output_item.added":
            return self._added(data.get("item") or {}, _index(data))
        if kind == "response.output_item.done":
            return self._done(data.get("item") or {}, _index(data))
        if kind in ("response.completed", "response.incomplete"):
            return self._end(data.get("response") or {})
        if kind == "response.failed":
            return [stream_error((data.get("response") or {}).get("error"))]
        if kind == "error":
            return [stream_error(data.get("error") or data)]
        return []

    def _start(self, item: _Item) -> int:
        item.index = self._next_block
        self._next_block += 1
        return item.index

    def _block(self, item: _Item) -> int:
        assert item.index is not None, "a started block has an index"
        return item.index

    def _added(self, raw: dict[str, Any], output_index: int) -> list[Event]:
        if raw.get("type") not in _ITEM_KINDS:
            return []
        item = self._items[output_index] = _Item(raw["type"])
        return self._open_call(item, raw) if item.kind == "function_call" else []

    def _open_call(self, item: _Item, raw: dict[str, Any]) -> list[Event]:
        self._tool_called = True
        name = restore_tool_name(str(raw.get("name") or ""), self._request)
        call_id = str(raw.get("call_id") or raw.get("id") or "")
        index = self._start(item)
        events: list[Event] = [BlockStarted(index, "tool_call", call_id, name)]
        if raw.get("arguments"):
            # Some upstreams send the whole call at once, and no argument deltas follow.
            item.deltas = True
            events.append(ArgumentsDelta(index, str(raw["arguments"])))
        return events

    def _delta(self, data: dict[str, Any], kind: str) -> list[Event]:
        item = self._items.setdefault(_index(data), _Item(kind))
        text = str(data.get("delta") or "")
        if not text or item.stopped or item.kind == "function_call":
            return []
        events: list[Event] = []
        if item.index is None:
            events.append(BlockStarted(self._start(item), _BLOCK_KINDS.get(item.kind, "thinking")))
        index = self._block(item)
        if item.kind == "message":
            events.append(TextDelta(index, text))
        else:
            summary_index = int(data.get("summary_index") or 0)
            if item.deltas and summary_index != item.summary_index:
                text = "\n\n" + text
            item.summary_index = summary_index
            events.append(ThinkingDelta(index, text))
        item.deltas = True
        return events

    def _done(self, raw: dict[str, Any], output_index: int) -> list[Event]:
        item = self._items.get(output_index)
        if item is None:
            if raw.get("type") not in _ITEM_KINDS:
                return []
            item = self._items[output_index] = _Item(raw["type"])
        if item.stopped:
            return []
        events: list[Event] = []
        if item.kind == "function_call" and item.index is None:
            events += self._open_call(item, raw)
        elif item.kind == "function_call" and not item.deltas and raw.get("arguments"):
            events.append(ArgumentsDelta(self._block(item), str(raw["arguments"])))
        elif not item.deltas:
            # Nothing streamed for this item: its complete form is all there is.
            text = message_text(raw) if item.kind == "message" else reasoning_text(raw)
            if text:
                index = self._start(item)
                block = _BLOCK_KINDS.get(item.kind, "thinking")
                delta = TextDelta(index, text) if block == "text" else ThinkingDelta(index, text)
                events += [BlockStarted(index, block), delta]
        item.stopped = True
        if item.index is not None:
            events.append(BlockStopped(item.index))
        return events

    def _end(self, response: dict[str, Any]) -> list[Event]:
        events: list[Event] = []
        for item in self._items.values():
            if item.index is not None and not item.stopped:
                item.stopped = True
                events.append(BlockStopped(item.index))
        stop = read_stop(response, tool_called=self._tool_called)
        events += [Finished(stop), UsageReported(read_usage(response.get("usage"))), Ended()]
        return events


def _index(data: dict[str, Any]) -> int:
    value = data.get("output_index")
    return value if isinstance(value, int) else 0


@dataclass(slots=True)
class _Output:
    """One output item the writer has opened for the client."""

    kind: str
    output_index: int
    item_id: str
    call_id: str = ""
    name: str = ""
    chunks: list[str] = field(default_factory=list)
    signature: str = ""
    summary_open: bool = False

    @property
    def where(self) -> dict[str, Any]:
        """The fields that place an event in this item."""
        return {"item_id": self.item_id, "output_index": self.output_index}


class ResponsesStreamWriter:
    """Writes canonical events as a Responses stream for one client.

    Every frame is `event: <type>` with `type` and a `sequence_number` counting from 0.
    After `Finished` the writer holds back until the usage (or the end) arrives, then
    sends `response.completed` with the whole response, its status `incomplete` when the
    model ran out of tokens or was filtered (a coding agent treats a `response.incomplete`
    event as a failed turn and retries it, where a truncated answer lets it go on). A
    signature in the thinking deltas is Anthropic's, since no other reader emits one: it
    reaches the client inside the reasoning item's `encrypted_content`.
    """

    def __init__(self, request: Request) -> None:
        self._request = request
        self._sequence = 0
        self._id = ""
        self._model = request.model
        self._created = 0
        self._output: list[dict[str, Any]] = []
        self._open: dict[int, _Output] = {}
        self._stop: Stop | None = None
        self._usage = CanonicalUsage()
        self._tool_called = False
        self._closed = False

    def write(self, event: Event) -> bytes:
        """The client's SSE frames for `event` (b"" while holding back or after the end)."""
        if self._closed or (self._stop is not None and isinstance(event, AFTER_THE_FINISH)):
            # Closed, or the model has stopped: what an upstream sends after is not the reply.
            return b""
        frames: list[bytes] = []
        if not self._id:
            frames += self._begin(event if isinstance(event, Started) else None)
        if isinstance(event, BlockStarted):
            frames += self._open_block(event.index, event.kind, event.call_id, event.name)
        elif isinstance(event, TextDelta | ArgumentsDelta | ThinkingDelta):
            frames += self._delta(event)
        elif isinstance(event, BlockStopped):
            frames += self._close_block(event.index)
        elif isinstance(event, Finished):
            self._stop = event.stop
        elif isinstance(event, UsageReported):
            self._usage = event.usage
            if self._stop is not None:
                frames += self._complete()
        elif isinstance(event, Ended):
            frames += self._complete()
        elif isinstance(event, StreamError):
            self._closed = True
            error = response_error(event.message, _FAILURE_CLASSES.get(event.kind))
            frames.append(self._lifecycle("response.failed", "failed", error=error))
        return b"".join(frames)

    def _frame(self, kind: str, **fields: Any) -> bytes:
        frame = encode_event({"type": kind, "sequence_number": self._sequence, **fields}, kind)
        self._sequence += 1
        return frame

    def _lifecycle(self, kind: str, status: str, **fields: Any) -> bytes:
        echo = request_echo(self._request)
        response = response_object(
            self._id, self._model, self._created, status, self._output, echo=echo, **fields
        )
        return self._frame(kind, response=response)

    def _begin(self, started: Started | None) -> list[bytes]:
        self._id = responses_id(started.id if started is not None else "")
        if started is not None:
            self._model = started.model or self._model
            self._created = started.created
            self._usage = started.usage or self._usage
        return [
            self._lifecycle("response.created", "in_progress"),
            self._lifecycle("response.in_progress", "in_progress"),
        ]

    def _open_block(
        self, index: int, kind: str, call_id: str | None = None, name: str | None = None
    ) -> list[bytes]:
        output_index = len(self._output)
        suffix = f"{self._id.removeprefix('resp_')}_{output_index}"
        if kind == "tool_call":
            self._tool_called = True
            call = call_id or f"call_{suffix}"
            out = _Output(kind, output_index, f"fc_{call}", call, name or "")
            item = function_call_item(out.item_id, call, out.name, "", status="in_progress")
        elif kind == "thinking":
            out = _Output(kind, output_index, f"rs_{suffix}")
            item = reasoning_item(out.item_id, "", None, status="in_progress")
        else:
            out = _Output("text", output_index, f"msg_{suffix}")
            item = message_item(out.item_id, [], status="in_progress")
        self._open[index] = out
        self._output.append(item)
        frames = [self._frame("response.output_item.added", output_index=output_index, item=item)]
        if out.kind == "text":
            frames.append(self._frame("response.content_part.added", **_text_part(out, "")))
        return frames

    def _delta(self, event: TextDelta | ArgumentsDelta | ThinkingDelta) -> list[bytes]:
        frames: list[bytes] = []
        if event.index not in self._open:
            kind = {TextDelta: "text", ArgumentsDelta: "tool_call"}.get(type(event), "thinking")
            frames += self._open_block(event.index, kind)
        out = self._open[event.index]
        if isinstance(event, ThinkingDelta):
            out.signature += event.signature or ""
        text = event.json if isinstance(event, ArgumentsDelta) else event.text
        if not text:
            return frames
        out.chunks.append(text)
        if isinstance(event, TextDelta):
            fields = {"content_index": 0, "delta": text, "logprobs": []}
            frames.append(self._frame("response.output_text.delta", **out.where, **fields))
        elif isinstance(event, ArgumentsDelta):
            frames.append(
                self._frame("response.function_call_arguments.delta", **out.where, delta=text)
            )
        else:
            if not out.summary_open:
                out.summary_open = True
                frames.append(
                    self._frame("response.reasoning_summary_part.added", **_summary(out, ""))
                )
            fields = {"summary_index": 0, "delta": text}
            frames.append(
                self._frame("response.reasoning_summary_text.delta", **out.where, **fields)
            )
        return frames

    def _close_block(self, index: int) -> list[bytes]:
        out = self._open.pop(index, None)
        if out is None:
            return []
        text = "".join(out.chunks)
        frames: list[bytes] = []
        if out.kind == "text":
            item = message_item(out.item_id, [text])
            fields = {"content_index": 0, "text": text, "logprobs": []}
            frames.append(self._frame("response.output_text.done", **out.where, **fields))
            frames.append(self._frame("response.content_part.done", **_text_part(out, text)))
        elif out.kind == "tool_call":
            # An empty argument string is not JSON: a call without arguments takes `{}`.
            text = text or "{}"
            item = function_call_item(out.item_id, out.call_id, out.name, text)
            frames.append(
                self._frame("response.function_call_arguments.done", **out.where, arguments=text)
            )
        else:
            signed = out.signature or None
            thinking = Thinking(text, signature=signed, origin="anthropic" if signed else "openai")
            item = reasoning_output(out.item_id, thinking)
            if out.summary_open:
                fields = {"summary_index": 0, "text": text}
                frames.append(
                    self._frame("response.reasoning_summary_text.done", **out.where, **fields)
                )
                frames.append(
                    self._frame("response.reasoning_summary_part.done", **_summary(out, text))
                )
        self._output[out.output_index] = item
        frames.append(
            self._frame("response.output_item.done", output_index=out.output_index, item=item)
        )
        return frames

    def _complete(self) -> list[bytes]:
        frames: list[bytes] = []
        for index in list(self._open):
            frames += self._close_block(index)
        self._closed = True
        stop = self._stop or (Stop.TOOL_USE if self._tool_called else Stop.END)
        reason = incomplete_reason(stop)
        status = "incomplete" if reason else "completed"
        usage = write_usage(self._usage)
        completed = self._lifecycle(
            "response.completed", status, usage=usage, incomplete_reason=reason
        )
        return [*frames, completed]


def _text_part(out: _Output, text: str) -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": []}
    return {**out.where, "content_index": 0, "part": part}


def _summary(out: _Output, text: str) -> dict[str, Any]:
    return {**out.where, "summary_index": 0, "part": {"type": "summary_text", "text": text}}
