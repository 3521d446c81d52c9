"""The Gemini API upstream (`generativelanguage.googleapis.com/v1beta`), with an API key.

Inside rungway a Gemini body is the wire `GenerateContentRequest` plus two keys taken from
the client's URL, `model` and `stream`; both leave the body here, the model for the URL
path (`{base}/models/{model}:generateContent`, or `:streamGenerateContent?alt=sse`) and the
stream for the method. The key goes in `x-goog-api-key`.

A stream is SSE whose frames end in `\\r\\n\\r\\n`, with no terminator event: the stream is
finished by the chunk that carries a `finishReason` (or a prompt block with no candidates),
and the last `usageMetadata` is its usage. An error inside a stream is a `data:` event
holding Google's error object.

No quota headers exist. A free-tier key's quota shows only in its 429s: the per-day or
per-minute window of the model they name (docs/provider-signals.md A6.2).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

import orjson

from rungway.adapters.base import Connection, EventKind, UpstreamCall, UpstreamRequest
from rungway.adapters.gemini.errors import classify_google_failure, error_of, stream_failure
from rungway.adapters.shape import RequestShape
from rungway.protocol.api import Api
from rungway.protocol.failures import Failure
from rungway.protocol.sse import SseEvent
from rungway.protocol.usage import CountReader, ReportedUsage
from rungway.quota import read_gemini_error, read_gemini_minute_window
from rungway.routing.snapshot import QuotaWindow

GATEWAY_KEYS: Final = frozenset({"model", "stream"})
"""The two keys rungway adds to a Gemini body from the URL; never sent upstream."""
GOOGLE_SHAPE = RequestShape(
    forwarded=("user-agent", "x-goog-api-client"), key_header="x-goog-api-key"
)
"""A Google request: the SDK's identity passed on, a key in `x-goog-api-key`, a login's
token as a bearer."""
# Parts a user sees besides text; a bare `thoughtSignature` or an empty text is not one.
_VISIBLE_PARTS = frozenset(
    {"functionCall", "inlineData", "fileData", "executableCode", "codeExecutionResult"}
)


class GeminiAdapter:
    """generateContent and streamGenerateContent against a Gemini API base URL."""

    api = Api.GEMINI
    shape = GOOGLE_SHAPE

    def build_request(self, call: UpstreamCall) -> UpstreamRequest:
        """POST {base_url}/models/{model}:generateContent (or the streaming method)."""
        # The body always carries the gateway's two keys, so the bytes are never the
        # client's as they stand: one re-encode, without them.
        return self.shape.request(
            call, model_path(call.model, call.stream), orjson.dumps(wire_body(call.body))
        )

    def count_tokens_request(self, call: UpstreamCall) -> UpstreamRequest | None:
        """POST {base_url}/models/{model}:countTokens."""
        body = orjson.dumps(count_body(call.body, call.model))
        return self.shape.request(call, f"/models/{call.model}:countTokens", body)

    def classify_failure(self, status: int, headers: Mapping[str, str], body: bytes) -> Failure:
        """Map a Google error response to a failure class (see `gemini_errors`)."""
        return classify_google_failure(status, headers, body)

    def read_usage(self, response: dict[str, Any]) -> ReportedUsage:
        """Usage of a complete `GenerateContentResponse`."""
        return read_usage_metadata(response.get("usageMetadata"), ReportedUsage())

    def read_quota(
        self, connection: Connection, *, model: str, headers: Mapping[str, str], now: float
    ) -> tuple[QuotaWindow, ...]:
        """None: Google sends no quota headers."""
        return ()

    def error_windows(
        self,
        connection: Connection,
        *,
        status: int,
        headers: Mapping[str, str],
        body: bytes,
        model: str,
        now: float,
    ) -> tuple[QuotaWindow, ...]:
        """The model's per-day or per-minute window a free-tier 429 shows spent."""
        return gemini_error_windows(status, body, model=model, now=now)

    def watch_stream(self, *, strip_usage_chunk: bool) -> GeminiWatcher:
        """A watcher for one Gemini event stream."""
        return GeminiWatcher()


class GeminiWatcher:
    """Tracks one Gemini stream: the held opening, the last usage, the finishing chunk."""

    __slots__ = ("_content_seen", "failure", "finished", "usage")

    def __init__(self) -> None:
        self._content_seen = False
        self.usage = ReportedUsage()
        self.failure: Failure | None = None
        self.finished = False

    def see(self, event: SseEvent) -> EventKind:
        """Classify one chunk (a `GenerateContentResponse`) or an error event."""
        chunk = orjson.loads(event.data)
        if not isinstance(chunk, dict):
            return EventKind.CONTENT if self._content_seen else EventKind.PREAMBLE
        if "error" in chunk:
            self.failure = stream_failure(event.data, error_of(chunk))
            return EventKind.ERROR
        metadata = chunk.get("usageMetadata")
        if metadata is not None:
            # Each chunk's usageMetadata is the running total: the last one stands.
            self.usage = read_usage_metadata(metadata, self.usage)
        if finishes(chunk):
            self.finished = True
            self._content_seen = True
            return EventKind.CONTENT
        if not self._content_seen:
            if not has_content(chunk):
                return EventKind.PREAMBLE
            self._content_seen = True
        return EventKind.CONTENT


def wire_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body as Google takes it: without the gateway's `model` and `stream`."""
    return {key: value for key, value in body.items() if key not in GATEWAY_KEYS}


def count_body(body: Mapping[str, Any], model: str) -> dict[str, Any]:
    """A countTokens body for `model`: a `generateContentRequest` inside it names its own
    model, which must be the upstream's, not the name (or alias) the client asked for."""
    wire = wire_body(body)
    for key in ("generateContentRequest", "generate_content_request"):
        inner = wire.get(key)
        if isinstance(inner, dict) and "model" in inner:
            wire[key] = {**inner, "model": f"models/{model}"}
    return wire


def model_path(model: str, stream: bool) -> str:
    """The generation path of `model` under a Gemini API base URL."""
    if stream:
        return f"/models/{model}:streamGenerateContent?alt=sse"
    return f"/models/{model}:generateContent"


def finishes(chunk: Mapping[str, Any]) -> bool:
    """True for the chunk that ends a stream: a candidate's `finishReason`, or a prompt
    blocked before any candidate (`promptFeedback.blockReason`)."""
    candidates = chunk.get("candidates")
    if isinstance(candidates, list) and candidates:
        return any(isinstance(c, dict) and c.get("finishReason") for c in candidates)
    feedback = chunk.get("promptFeedback")
    return isinstance(feedback, dict) and bool(feedback.get("blockReason"))


def has_content(chunk: Mapping[str, Any]) -> bool:
    """True when a chunk carries something a user would see: text, a thought, a call."""
    for candidate in chunk.get("candidates") or ():
        content = candidate.get("content") if isinstance(candidate, dict) else None
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else ():
            if isinstance(part, dict) and (part.get("text") or _VISIBLE_PARTS & part.keys()):
                return True
    return False


def read_usage_metadata(raw: object, previous: ReportedUsage) -> ReportedUsage:
    """Token counts from `usageMetadata` in rungway's terms.

    `promptTokenCount` includes the cached tokens, which rungway counts apart;
    `thoughtsTokenCount` is not part of `candidatesTokenCount` but is billed as output, so
    output is both, and the thoughts are its reasoning part. Tool-use prompt tokens are
    input the model read.
    """
    if not isinstance(raw, dict):
        return previous
    # Each chunk's metadata replaces the last; one that was not a count taints the reply.
    counts = CountReader(previous.invalid)
    count = counts.read
    cached = count(raw, "cachedContentTokenCount")
    thoughts = count(raw, "thoughtsTokenCount")
    prompt = count(raw, "promptTokenCount")
    return ReportedUsage(
        input_tokens=max(0, prompt - cached) + count(raw, "toolUsePromptTokenCount"),
        output_tokens=count(raw, "candidatesTokenCount") + thoughts,
        cache_read_tokens=cached,
        reasoning_tokens=thoughts,
        invalid=counts.invalid,
    )


def gemini_error_windows(
    status: int, body: bytes, *, model: str, now: float
) -> tuple[QuotaWindow, ...]:
    """The windows a Gemini 429 shows spent: the daily ones the quota reader names, or the
    model's per-minute window until its retry delay has passed.

    Google's quotas are per model (the free tier's per model and day or minute, Code
    Assist's buckets per model), so a window the error names without a model is `model`'s.
    """
    windows = read_gemini_error(status, body, now=now).windows
    if not windows:
        minute = read_gemini_minute_window(status, body, now=now)
        windows = () if minute is None else (minute,)
    return tuple(w if w.model is not None else replace(w, model=model) for w in windows)
