"""Gemini API replies and streams, read into and written from the canonical form.

A Gemini stream (`streamGenerateContent?alt=sse`) is a series of `data:` events, each a
whole GenerateContentResponse holding the next few parts; there are no start, stop or
terminator events. The last chunk carries `finishReason` and `usageMetadata`. Function
calls arrive whole, in one part each. https://ai.google.dev/api/generate-content

Usage: `promptTokenCount` includes `cachedContentTokenCount`; `thoughtsTokenCount` is not
part of `candidatesTokenCount`. Canonically, input excludes the cached tokens, and thoughts
are output and also reasoning tokens.
"""

from __future__ import annotations

import uuid
from typing import Any, Final

import orjson

from rungway.protocol.failures import FailureClass
from rungway.protocol.gemini import field
from rungway.protocol.sse import SseEvent
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
from rungway.translate.names import restore_tool_name

SKIP_SIGNATURE: Final = "skip_thought_signature_validator"
"""The stand-in thought signature Google documents for function calls that Gemini did not
make itself (history from another model): Gemini 3 rejects such calls without one.
https://ai.google.dev/gemini-api/docs/thought-signatures"""

FILTERED_REASONS: Final = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}
    | {"IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION"}
)
"""Finish reasons that mean the reply was blocked or cut by a content filter."""

_FINISH_NAMES: Final = {
    Stop.END: "STOP",
    Stop.STOP_SEQUENCE: "STOP",
    Stop.TOOL_USE: "STOP",  # Gemini ends a turn of function calls with STOP
    Stop.PAUSED: "STOP",
    Stop.LENGTH: "MAX_TOKENS",
    Stop.FILTERED: "SAFETY",
}
_ERROR_KINDS: Final = {
    "RESOURCE_EXHAUSTED": "rate_limited",
    "UNAVAILABLE": "overloaded",
    "INVALID_ARGUMENT": "bad_request",
    "FAILED_PRECONDITION": "billing",  # billing not set up where the free tier is not offered
    "UNAUTHENTICATED": "auth",
    "PERMISSION_DENIED": "auth",
}
_STREAM_FAILURES: Final = {"context": FailureClass.CONTEXT_TOO_LONG}
_STREAM_STATUS: Final = {
    FailureClass.RATE_LIMITED: (429, "RESOURCE_EXHAUSTED"),
    FailureClass.QUOTA_EXHAUSTED: (429, "RESOURCE_EXHAUSTED"),
    FailureClass.OVERLOADED: (503, "UNAVAILABLE"),
    FailureClass.BAD_REQUEST: (400, "INVALID_ARGUMENT"),
    FailureClass.CONTEXT_TOO_LONG: (400, "INVALID_ARGUMENT"),
    FailureClass.AUTH: (401, "UNAUTHENTICATED"),
    FailureClass.BILLING: (400, "FAILED_PRECONDITION"),
}


def read_stop(reason: object, *, called: bool) -> Stop:
    """The canonical stop for a `finishReason`; `called` when the reply calls a function."""
    if reason in FILTERED_REASONS:
        return Stop.FILTERED
    if reason == "MAX_TOKENS":
        return Stop.LENGTH
    return Stop.TOOL_USE if called else Stop.END


def read_usage(usage: Any) -> CanonicalUsage:
    """`usageMetadata` as canonical usage."""
    if not isinstance(usage, dict):
        return CanonicalUsage()
    counts = CountReader()

    def read(name: str) -> int:
        # `field` reads the camelCase name or its snake_case twin.
        return counts.check(field(usage, name), name)

    prompt = read("promptTokenCount")
    cached = read("cachedContentTokenCount")
    tool_prompt = read("toolUsePromptTokenCount")
    thoughts = read("thoughtsTokenCount")
    candidates = read("candidatesTokenCount")
    return CanonicalUsage(
        input_tokens=max(0, prompt - cached) + tool_prompt,
        output_tokens=candidates + thoughts,
        cache_read_tokens=cached,
        reasoning_tokens=thoughts,
        invalid=counts.invalid,
    )


def write_usage(usage: CanonicalUsage) -> dict[str, Any]:
    """Canonical usage as `usageMetadata`; cache writes count as prompt tokens."""
    prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    thoughts = min(usage.reasoning_tokens, usage.output_tokens)
    written: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": usage.output_tokens - thoughts,
        "totalTokenCount": prompt + usage.output_tokens,
    }
    if usage.cache_read_tokens:
        written["cachedContentTokenCount"] = usage.cache_read_tokens
    if thoughts:
        written["thoughtsTokenCount"] = thoughts
    return written


def function_call_part(name: str, arguments: str, call_id: str | None = None) -> dict[str, Any]:
    """A `functionCall` part with its `id`; arguments that are not a JSON object go under
    `input`."""
    try:
        args = orjson.loads(arguments) if arguments.strip() else {}
    except orjson.JSONDecodeError:
        args = {"input": arguments}
    if not isinstance(args, dict):
        args = {"input": args}
    call: dict[str, Any] = {"name": name, "args": args}
    if call_id:
        call["id"] = call_id
    return {"functionCall": call}


def call_id(reply_id: str, number: int, given: object = None) -> str:
    """The id of a reply's `number`th function call: Gemini's own when it sent one."""
    return given if isinstance(given, str) and given else f"call_{reply_id}_{number}"


def reply_id(body: dict[str, Any]) -> str:
    """The reply's `responseId`, or a fresh one: call ids are built on it and must differ
    from one reply to the next."""
    found = field(body, "responseId")
    return found if isinstance(found, str) and found else uuid.uuid4().hex[:24]


def read_reply(body: dict[str, Any], request: Request) -> Reply:
    """A GenerateContentResponse as a canonical reply; a blocked prompt is FILTERED."""
    identifier = reply_id(body)
    candidates = body.get("candidates") or []
    candidate = candidates[0] if candidates and isinstance(candidates[0], dict) else {}
    parts: list[Text | ToolCall | Thinking] = []
    calls = 0
    for part in (candidate.get("content") or {}).get("parts") or []:
        signature = _signature(part)
        text = part.get("text")
        call = field(part, "functionCall")
        if isinstance(text, str) and part.get("thought"):
            parts.append(Thinking(text, signature=signature, origin="gemini"))
            continue
        if signature:
            parts.append(Thinking("", signature=signature, origin="gemini"))
        if isinstance(text, str) and text:
            parts.append(Text(text))
        elif isinstance(call, dict):
            arguments = orjson.dumps(call.get("args") or {}).decode()
            name = restore_tool_name(str(call.get("name", "")), request)
            parts.append(ToolCall(call_id(identifier, calls, call.get("id")), name, arguments))
            calls += 1
    blocked = not candidates and field(body.get("promptFeedback") or {}, "blockReason")
    stop = (
        Stop.FILTERED if blocked else read_stop(field(candidate, "finishReason"), called=calls > 0)
    )
    return Reply(
        id=identifier,
        model=field(body, "modelVersion") or request.model,
        parts=tuple(parts),
        stop=stop,
        usage=read_usage(field(body, "usageMetadata")),
    )


def _signature(part: dict[str, Any]) -> str | None:
    """A part's thought signature; the documented stand-in is none."""
    signature = field(part, "thoughtSignature")
    return signature if isinstance(signature, str) and signature != SKIP_SIGNATURE else None


def write_reply(reply: Reply, model: str) -> dict[str, Any]:
    """The GenerateContentResponse a Gemini client gets for `reply`."""
    parts: list[dict[str, Any]] = []
    signature: str | None = None
    for part in reply.parts:
        if isinstance(part, Thinking):
            if part.text:
                thought: dict[str, Any] = {"text": part.text, "thought": True}
                if part.origin == "gemini" and part.signature:
                    thought["thoughtSignature"] = part.signature
                parts.append(thought)
            elif part.origin == "gemini" and part.signature:
                signature = part.signature
            continue
        written = (
            {"text": part.text}
            if isinstance(part, Text)
            else function_call_part(part.name, part.arguments, part.id)
        )
        if signature is not None:
            written["thoughtSignature"] = signature
            signature = None
        parts.append(written)
    if signature is not None:
        parts.append({"text": "", "thoughtSignature": signature})
    candidate: dict[str, Any] = {"finishReason": _FINISH_NAMES[reply.stop], "index": 0}
    if parts:
        candidate["content"] = {"role": "model", "parts": parts}
    return {
        "candidates": [candidate],
        "usageMetadata": write_usage(reply.usage),
        "modelVersion": reply.model or model,
        "responseId": reply.id,
    }


class GeminiStreamReader:
    """Turns a Gemini upstream's stream chunks into canonical events.

    Each run of text (or of thought) parts is one block; each function call is a block of
    its own, opened, filled and closed at once. The chunk with a `finishReason` ends the
    stream. Thought signatures stay out: stream events carry no origin to keep them apart.
    """

    def __init__(self, request: Request) -> None:
        self._request = request
        self._id: str | None = None
        self._open: tuple[int, str] | None = None  # (index, "text" | "thinking")
        self._next = 0
        self._calls = 0
        self._done = False

    def read(self, event: SseEvent) -> list[Event]:
        """The canonical events one chunk carries."""
        if self._done:
            return []
        try:
            chunk = event.json()
        except orjson.JSONDecodeError:
            self._done = True
            return [StreamError("server", "unreadable stream chunk from the upstream")]
        if not isinstance(chunk, dict):
            return []
        if isinstance(chunk.get("error"), dict):
            self._done = True
            return [_stream_error(chunk["error"])]
        out: list[Event] = []
        if self._id is None:
            self._id = reply_id(chunk)
            model = field(chunk, "modelVersion") or self._request.model
            out.append(Started(self._id, model))
        candidates = chunk.get("candidates") or []
        candidate = candidates[0] if candidates and isinstance(candidates[0], dict) else {}
        for part in (candidate.get("content") or {}).get("parts") or []:
            if isinstance(part, dict):
                out += self._part(part)
        reason = field(candidate, "finishReason")
        blocked = not candidates and field(chunk.get("promptFeedback") or {}, "blockReason")
        if reason or blocked:
            self._done = True
            out += self._close()
            stop = Stop.FILTERED if blocked else read_stop(reason, called=self._calls > 0)
            usage = read_usage(field(chunk, "usageMetadata"))
            out += [Finished(stop), UsageReported(usage), Ended()]
        return out

    def _part(self, part: dict[str, Any]) -> list[Event]:
        text = part.get("text")
        if isinstance(text, str):
            if not text:
                return []
            kind = "thinking" if part.get("thought") else "text"
            out: list[Event] = []
            if self._open is None or self._open[1] != kind:
                out += self._close()
                self._open = (self._next, kind)
                self._next += 1
                out.append(
                    BlockStarted(self._open[0], "thinking" if kind == "thinking" else "text")
                )
            index = self._open[0]
            out.append(ThinkingDelta(index, text) if kind == "thinking" else TextDelta(index, text))
            return out
        call = field(part, "functionCall")
        if not isinstance(call, dict):
            return []
        out = self._close()
        index = self._next
        self._next += 1
        identifier = call_id(self._id or "", self._calls, call.get("id"))
        self._calls += 1
        name = restore_tool_name(str(call.get("name", "")), self._request)
        arguments = orjson.dumps(call.get("args") or {}).decode()
        out += [
            BlockStarted(index, "tool_call", call_id=identifier, name=name),
            ArgumentsDelta(index, arguments),
            BlockStopped(index),
        ]
        return out

    def _close(self) -> list[Event]:
        if self._open is None:
            return []
        index = self._open[0]
        self._open = None
        return [BlockStopped(index)]


def _stream_error(error: dict[str, Any]) -> StreamError:
    message = str(error.get("message") or "the upstream reported an error")
    kind = _ERROR_KINDS.get(str(error.get("status")), "server")
    if kind == "bad_request" and "token" in message and "exceed" in message:
        kind = "context"
    return StreamError(kind, message)  # type: ignore[arg-type]


class GeminiStreamWriter:
    """Turns canonical events into a Gemini client's stream: one `data:` chunk per piece
    of text or thought and per complete function call, and a last chunk with the finish
    reason and the usage."""

    def __init__(self, request: Request) -> None:
        self._model = request.model
        self._id = ""
        self._calls: dict[int, tuple[str, str | None, list[str]]] = {}
        self._stop: Stop | None = None
        self._usage = CanonicalUsage()
        self._done = False

    def write(self, event: Event) -> bytes:
        """The chunks for `event`; the finish is held until the end, with the usage."""
        if self._done or (self._stop is not None and isinstance(event, AFTER_THE_FINISH)):
            # Done, or the model has stopped: what an upstream sends after is not the reply.
            return b""
        if isinstance(event, Started):
            self._id = event.id
            self._model = event.model or self._model
            if event.usage is not None:
                self._usage = event.usage
            return b""
        if isinstance(event, TextDelta) and event.text:
            return self._chunk([{"text": event.text}])
        if isinstance(event, ThinkingDelta) and event.text:
            return self._chunk([{"text": event.text, "thought": True}])
        if isinstance(event, BlockStarted) and event.kind == "tool_call":
            self._calls[event.index] = (event.name or "", event.call_id, [])
        elif isinstance(event, ArgumentsDelta) and event.index in self._calls:
            self._calls[event.index][2].append(event.json)
        elif isinstance(event, BlockStopped) and event.index in self._calls:
            name, call_id, pieces = self._calls.pop(event.index)
            return self._chunk([function_call_part(name, "".join(pieces), call_id)])
        elif isinstance(event, Finished):
            self._stop = event.stop
        elif isinstance(event, UsageReported):
            self._usage = event.usage
        elif isinstance(event, StreamError):
            self._done = True
            return _error_event(event)
        elif isinstance(event, Ended):
            self._done = True
            return self._chunk([{"text": ""}], final=True)
        return b""

    def _chunk(self, parts: list[dict[str, Any]], *, final: bool = False) -> bytes:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        chunk: dict[str, Any] = {"candidates": [candidate]}
        if final:
            candidate["finishReason"] = _FINISH_NAMES[self._stop or Stop.END]
            chunk["usageMetadata"] = write_usage(self._usage)
        chunk["modelVersion"] = self._model
        if self._id:
            chunk["responseId"] = self._id
        return b"data: " + orjson.dumps(chunk) + b"\r\n\r\n"


def _error_event(error: StreamError) -> bytes:
    kind = _STREAM_FAILURES.get(error.kind) or FailureClass(error.kind)
    status, name = _STREAM_STATUS.get(kind, (500, "INTERNAL"))
    payload = {"error": {"code": status, "message": error.message, "status": name}}
    return b"data: " + orjson.dumps(payload) + b"\r\n\r\n"
