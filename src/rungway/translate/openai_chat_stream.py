"""OpenAI Chat Completions streams, read into and written from canonical events.

Also holds what a stream chunk shares with a complete reply (finish reasons, usage and
completion ids), which `openai_chat` uses too.

The reader copes with how OpenAI-compatible upstreams differ: a tool call's id and name in
separate chunks (its block opens once both are known, arguments buffered meanwhile),
cumulative snapshot arguments instead of deltas, an `index` reused for a new call, repeated
finish chunks, and usage on a choice-less chunk after the finish chunk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson

from rungway.protocol import json_values
from rungway.protocol.failures import FailureClass
from rungway.protocol.openai_chat import stream_error_event
from rungway.protocol.sse import DONE, SseEvent, encode_event
from rungway.protocol.usage import CountReader
from rungway.translate.canonical import (
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
    ThinkingDelta,
    UsageReported,
)
from rungway.translate.names import restore_tool_name

_STOPS = {
    "stop": Stop.END,
    "length": Stop.LENGTH,
    "tool_calls": Stop.TOOL_USE,
    "function_call": Stop.TOOL_USE,
    "content_filter": Stop.FILTERED,
}
_FINISH_REASONS = {
    Stop.END: "stop",
    Stop.STOP_SEQUENCE: "stop",
    Stop.LENGTH: "length",
    Stop.TOOL_USE: "tool_calls",
    Stop.FILTERED: "content_filter",
    Stop.PAUSED: "stop",
}
_FAILURES = {"context": FailureClass.CONTEXT_TOO_LONG}

ErrorKind = Literal[
    "overloaded", "rate_limited", "server", "bad_request", "auth", "billing", "context"
]


def read_stop(finish_reason: object, *, called: bool) -> Stop:
    """The canonical stop for a Chat `finish_reason`; `called` when the reply has tool calls.

    Some upstreams end a tool-calling turn with `stop`; a client that loops on tool use
    must still see it as one.
    """
    stop = _STOPS.get(finish_reason, Stop.END) if isinstance(finish_reason, str) else Stop.END
    return Stop.TOOL_USE if called and stop is Stop.END else stop


def finish_reason(stop: Stop) -> str:
    """The Chat `finish_reason` for a canonical stop (Chat cannot say which stop sequence)."""
    return _FINISH_REASONS[stop]


def completion_id(reply_id: str) -> str:
    """A `chatcmpl-` id for a reply id from any API."""
    return reply_id if reply_id.startswith("chatcmpl-") else f"chatcmpl-{reply_id}"


def read_usage(usage: dict[str, Any]) -> CanonicalUsage:
    """Chat usage as canonical usage: cached and cache-written tokens leave the input count."""
    prompt_details = json_values.mapping(usage.get("prompt_tokens_details"))
    output_details = json_values.mapping(usage.get("completion_tokens_details"))
    counts = CountReader()
    count = counts.read
    # DeepSeek reports cache hits at the top level instead of in prompt_tokens_details.
    cached = count(prompt_details, "cached_tokens") or count(usage, "prompt_cache_hit_tokens")
    written = count(prompt_details, "cache_write_tokens") or count(
        prompt_details, "cache_creation_tokens"
    )
    return CanonicalUsage(
        input_tokens=max(count(usage, "prompt_tokens") - cached - written, 0),
        output_tokens=count(usage, "completion_tokens"),
        cache_read_tokens=cached,
        cache_write_tokens=written,
        reasoning_tokens=count(output_details, "reasoning_tokens"),
        invalid=counts.invalid,
    )


def write_usage(usage: CanonicalUsage) -> dict[str, Any]:
    """Canonical usage as Chat usage: the prompt count includes cache reads and writes."""
    prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": usage.output_tokens,
        "total_tokens": prompt + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def error_kind(error: dict[str, Any]) -> ErrorKind:
    """The canonical kind of an in-stream error object, from its type, code or status."""
    code = error.get("code")
    status = code if isinstance(code, int) else None
    words = f"{error.get('type')} {code}".lower()
    if "context" in words:
        return "context"
    if "insufficient_quota" in words or "billing" in words or status == 402:
        return "billing"
    if "rate_limit" in words or status == 429:
        return "rate_limited"
    if "overloaded" in words or status in (503, 529):
        return "overloaded"
    if "auth" in words or "permission" in words or status in (401, 403):
        return "auth"
    if "invalid_request" in words or status == 400:
        return "bad_request"
    return "server"


@dataclass(slots=True)
class _Call:
    """One streamed tool call: what is known of it, and its block once opened."""

    id: str | None = None
    name: str | None = None
    arguments: str = ""
    block: int | None = None
    closed: bool = False

    def take(self, fragment: str) -> str:
        """The new part of an argument fragment, which may repeat everything so far."""
        if self.arguments and fragment.startswith(self.arguments):
            fragment = fragment[len(self.arguments) :]
        self.arguments += fragment
        return fragment


class ChatStreamReader:
    """Chat Completions chunks from an upstream, as canonical events."""

    def __init__(self, request: Request) -> None:
        self._request = request
        self._started = False
        self._finished = False
        self._failed = False
        self._ended = False
        self._next_index = 0
        self._open: tuple[int, str] | None = None
        self._calls: list[_Call] = []
        self._slots: dict[int, _Call] = {}
        self._usage: CanonicalUsage | None = None

    def read(self, event: SseEvent) -> list[Event]:
        """The canonical events one upstream chunk carries."""
        data = event.data.strip()
        if self._ended or not data:
            return []
        if data == b"[DONE]":
            return self._end()
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            return []
        if not isinstance(chunk, dict) or self._failed:
            return []
        error = chunk.get("error")
        if isinstance(error, dict) or event.event == "error":
            self._failed = True
            error = error if isinstance(error, dict) else chunk
            message = error.get("message")
            text = message if isinstance(message, str) and message else "upstream stream error"
            return [StreamError(error_kind(error), text)]
        out: list[Event] = []
        if not self._started:
            out.append(self._start(chunk))
        for choice in chunk.get("choices") or ():
            if isinstance(choice, dict) and choice.get("index", 0) == 0 and not self._finished:
                self._read_choice(choice, out)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            reported = read_usage(usage)
            if reported != self._usage:
                self._usage = reported
                out.append(UsageReported(reported))
        return out

    def _start(self, chunk: dict[str, Any]) -> Started:
        self._started = True
        created = chunk.get("created")
        return Started(
            id=str(chunk.get("id") or ""),
            model=str(chunk.get("model") or self._request.model),
            created=json_values.count(created),
        )

    def _read_choice(self, choice: dict[str, Any], out: list[Event]) -> None:
        delta = json_values.mapping(choice.get("delta"))
        reasoning = delta.get("reasoning_content")
        if not isinstance(reasoning, str):
            reasoning = delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._append("thinking", reasoning, out)
        for key in ("content", "refusal"):
            text = delta.get(key)
            if isinstance(text, str) and text:
                self._append("text", text, out)
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for call in calls:
                if isinstance(call, dict):
                    self._read_call(call, out)
        reason = choice.get("finish_reason")
        if reason is not None:
            self._finish(reason, out)

    def _append(self, kind: Literal["text", "thinking"], text: str, out: list[Event]) -> None:
        if self._open is None or self._open[1] != kind:
            self._open_block(kind, out)
        assert self._open is not None
        index = self._open[0]
        out.append(TextDelta(index, text) if kind == "text" else ThinkingDelta(index, text))

    def _open_block(
        self,
        kind: Literal["text", "thinking", "tool_call"],
        out: list[Event],
        call: _Call | None = None,
    ) -> int:
        self._close(out)
        index = self._next_index
        self._next_index += 1
        self._open = (index, kind)
        if call is None:
            out.append(BlockStarted(index, kind))
        else:
            call.block = index
            name = restore_tool_name(call.name or "", self._request)
            out.append(BlockStarted(index, "tool_call", call_id=call.id, name=name))
        return index

    def _close(self, out: list[Event]) -> None:
        if self._open is None:
            return
        index, kind = self._open
        out.append(BlockStopped(index))
        if kind == "tool_call":
            for call in self._calls:
                if call.block == index:
                    call.closed = True
        self._open = None

    def _call_for(self, fragment: dict[str, Any]) -> _Call:
        call_id = fragment.get("id")
        call_id = call_id if isinstance(call_id, str) and call_id else None
        position = fragment.get("index")
        if isinstance(position, int):
            call = self._slots.get(position)
            # Some upstreams give every call index 0: a different id means a new call.
            if call is None or (call_id is not None and call.id not in (None, call_id)):
                call = self._slots[position] = self._new_call()
            return call
        # Without an index, a known id names its call, a new id starts one (unless the last
        # call still waits for its id), and a fragment without an id continues the last.
        for call in self._calls:
            if call_id is not None and call.id == call_id:
                return call
        last = self._calls[-1] if self._calls else None
        if last is not None and (call_id is None or last.id is None):
            return last
        return self._new_call()

    def _new_call(self) -> _Call:
        call = _Call()
        self._calls.append(call)
        return call

    def _read_call(self, fragment: dict[str, Any], out: list[Event]) -> None:
        call = self._call_for(fragment)
        if call.closed:
            return  # a late fragment for a block already closed has nowhere to go
        function = json_values.mapping(fragment.get("function"))
        call_id, name = fragment.get("id"), function.get("name")
        if call.id is None and isinstance(call_id, str) and call_id:
            call.id = call_id
        if call.name is None and isinstance(name, str) and name:
            call.name = name
        arguments = function.get("arguments")
        piece = call.take(arguments) if isinstance(arguments, str) else ""
        if call.block is None:
            if call.id is not None and call.name is not None:
                self._start_call(call, out)
        elif piece:
            out.append(ArgumentsDelta(call.block, piece))

    def _start_call(self, call: _Call, out: list[Event]) -> None:
        index = self._open_block("tool_call", out, call)
        if call.arguments:
            out.append(ArgumentsDelta(index, call.arguments))

    def _finish(self, reason: object, out: list[Event]) -> None:
        for number, call in enumerate(self._calls):
            if call.block is None and call.name is not None:
                call.id = call.id or f"call_{number}"
                self._start_call(call, out)
        self._close(out)
        called = any(call.block is not None for call in self._calls)
        out.append(Finished(read_stop(reason, called=called)))
        self._finished = True

    def _end(self) -> list[Event]:
        out: list[Event] = []
        self._ended = True
        if not self._failed:
            if not self._started:
                out.append(Started(id="", model=self._request.model))
            if not self._finished:
                self._finish("stop", out)
        out.append(Ended())
        return out


@dataclass(slots=True)
class _ToolSlot:
    """A tool-call block on the client side: its Chat index and whether arguments went out."""

    position: int
    sent: bool = False


class ChatStreamWriter:
    """Canonical events as Chat Completions chunks for a Chat client."""

    def __init__(self, request: Request) -> None:
        self._include_usage = request.include_usage
        self._id = completion_id("")
        self._model = request.model
        self._created = 0
        self._started = False
        self._done = False
        self._tools: dict[int, _ToolSlot] = {}
        self._finished = False
        self._held: str | None = None
        self._usage: CanonicalUsage | None = None

    def write(self, event: Event) -> bytes:
        """The chunks for `event`; the finish chunk is held until usage or the end."""
        if self._done:
            return b""
        if isinstance(event, Started):
            if self._started:
                return b""
            self._id = completion_id(event.id)
            self._model = event.model or self._model
            self._created = event.created
            self._usage = event.usage
            return self._open()
        if isinstance(event, StreamError):
            self._done = True
            kind = _FAILURES.get(event.kind) or FailureClass(event.kind)
            return stream_error_event(event.message, kind)
        if isinstance(event, Ended):
            return self._end()
        if isinstance(event, UsageReported):
            self._usage = event.usage
            return self._flush() if self._held is not None else b""
        if self._finished:
            return b""
        head = b"" if self._started else self._open()
        if isinstance(event, Finished):
            self._finished = True
            self._held = finish_reason(event.stop)
            return head
        return head + self._content(event)

    def _content(self, event: Event) -> bytes:
        if isinstance(event, TextDelta) and event.text:
            return self._chunk({"content": event.text})
        if isinstance(event, ThinkingDelta) and event.text:
            # Not standard Chat, but the field reasoning clients read; signatures stay out.
            return self._chunk({"reasoning_content": event.text})
        if isinstance(event, BlockStarted) and event.kind == "tool_call":
            slot = self._tools[event.index] = _ToolSlot(len(self._tools))
            function = {"name": event.name or "", "arguments": ""}
            call = {"index": slot.position, "id": event.call_id or "", "type": "function"}
            return self._chunk({"tool_calls": [{**call, "function": function}]})
        if isinstance(event, ArgumentsDelta | BlockStopped) and event.index in self._tools:
            slot = self._tools[event.index]
            text = event.json if isinstance(event, ArgumentsDelta) else "" if slot.sent else "{}"
            if text:  # a call that never got arguments still needs an object: "{}"
                slot.sent = True
                call = {"index": slot.position, "function": {"arguments": text}}
                return self._chunk({"tool_calls": [call]})
        return b""

    def _open(self) -> bytes:
        self._started = True
        return self._chunk({"role": "assistant", "content": ""})

    def _end(self) -> bytes:
        head = b"" if self._started else self._open()
        if not self._finished:
            self._finished = True
            self._held = "stop"
        tail = self._flush() if self._held is not None else b""
        self._done = True
        return head + tail + DONE

    def _flush(self) -> bytes:
        frames = self._chunk({}, self._held)
        self._held = None
        if self._include_usage and self._usage is not None:
            chunk = self._frame([])
            chunk["usage"] = write_usage(self._usage)
            frames += encode_event(chunk)
        return frames

    def _chunk(self, delta: dict[str, Any], reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
        return encode_event(self._frame([choice]))

    def _frame(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        frame: dict[str, Any] = {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self._model,
            "choices": choices,
        }
        if self._include_usage:
            frame["usage"] = None  # as the real API does on every chunk but the usage one
        return frame
