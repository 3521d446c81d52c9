"""The canonical conversation: what every wire API's request, reply and stream mean.

Translation between two APIs goes through these types, and only when the client's API and
the upstream's differ: each API has a reader (wire -> canonical) and a writer (canonical ->
wire) for requests, replies and stream events. A same-API route never builds them.

Conventions shared by every reader and writer:
- Token counts follow `ReportedUsage`: `input_tokens` excludes cache reads and writes, and
  reasoning tokens are part of `output_tokens` (counted once).
- Tool arguments are kept as the JSON text the model produced, never re-serialised.
- A `Thinking` part keeps its `signature` only for the provider family that made it
  (`origin`); writers for another family drop signed and redacted thinking.
- What a writer cannot express is dropped on purpose and named in `Dropped`, so tests can
  list every such field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class Text:
    """Plain text; `cache` is Anthropic's `cache_control` object when one was set."""

    text: str
    cache: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Image:
    """An image, either inline (`data` in base64 with its `media_type`) or by `url`."""

    media_type: str | None = None
    data: str | None = None
    url: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The model asks for a tool: `arguments` is the JSON text of its input."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool's answer to the call `call_id`, as text and images."""

    call_id: str
    content: tuple[Text | Image, ...]
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class Thinking:
    """The model's reasoning. `signature` (or `redacted`, Anthropic's opaque
    `redacted_thinking` data) is only valid for the provider family named in `origin`."""

    text: str
    signature: str | None = None
    redacted: str | None = None
    origin: Literal["anthropic", "openai", "gemini"] | None = None


Part = Text | Image | ToolCall | ToolResult | Thinking


@dataclass(frozen=True, slots=True)
class Message:
    """One turn. System and developer text lives in `Request.system`, never here."""

    role: Literal["user", "assistant"]
    parts: tuple[Part, ...]


@dataclass(frozen=True, slots=True)
class Tool:
    """A function the model may call; `parameters` is its JSON Schema."""

    name: str
    description: str | None
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolNamed:
    """The one tool the model must call. A type of its own, so that a tool literally
    named `auto`, `none` or `required` is never mistaken for a mode."""

    name: str


ToolChoice = Literal["auto", "none", "required"] | ToolNamed
"""`auto`, `none`, `required` (some tool), or the one tool to call."""

TOOL_MODES: dict[object, ToolChoice] = {"auto": "auto", "none": "none", "required": "required"}
"""The tool-choice modes by their wire name, which OpenAI's APIs and the canonical share."""


@dataclass(frozen=True, slots=True)
class OutputFormat:
    """The client asked for JSON output: conforming to `schema` (a JSON Schema) when one is
    given, otherwise any JSON object. `name` and `strict` are OpenAI's `json_schema` fields,
    kept so a same-family writer can pass them on."""

    schema: dict[str, Any] | None = None
    name: str | None = None
    strict: bool | None = None


@dataclass(frozen=True, slots=True)
class Reasoning:
    """How much the model should think: an effort level, a token budget, or both."""

    effort: Literal["minimal", "low", "medium", "high"] | None = None
    budget_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Request:
    """A client's request, whatever API it came in."""

    model: str
    messages: tuple[Message, ...]
    system: tuple[Text, ...] = ()
    tools: tuple[Tool, ...] = ()
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    """On the client's own scale: 0-2 for OpenAI APIs, 0-1 for Anthropic's."""
    temperature_max: float = 2.0
    """The top of the client's temperature scale, so a writer can rescale or clamp."""
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    stream: bool = False
    include_usage: bool = False
    """An OpenAI Chat client asked for the trailing usage chunk (`stream_options`)."""
    reasoning: Reasoning | None = None
    output_format: OutputFormat | None = None
    """Structured output; a writer whose API cannot carry it must not drop it silently."""
    user: str | None = None
    dropped: tuple[str, ...] = ()
    """Fields of the client's request that the reader could not carry (`Dropped` names)."""


class Stop(StrEnum):
    """Why the model stopped."""

    END = "end"
    LENGTH = "length"
    TOOL_USE = "tool_use"
    STOP_SEQUENCE = "stop_sequence"
    FILTERED = "filtered"
    PAUSED = "paused"


@dataclass(frozen=True, slots=True)
class CanonicalUsage:
    """Token counts: `input_tokens` excludes cache reads and writes; reasoning is inside
    `output_tokens`."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    invalid: str | None = None
    """The first field the upstream sent that is not a token count, which reads as 0
    (`protocol.usage.CountReader`); None when every count was one."""


@dataclass(frozen=True, slots=True)
class Reply:
    """A complete, non-streamed answer."""

    id: str
    model: str
    parts: tuple[Text | ToolCall | Thinking, ...]
    stop: Stop
    stop_sequence: str | None = None
    usage: CanonicalUsage = field(default_factory=CanonicalUsage)
    created: int = 0
    """Epoch seconds; 0 when the upstream did not say."""


# Stream events: a reader turns an upstream's SSE events into these, in order; a writer
# turns them into the client's SSE frames. Block indexes are the canonical content order
# (0, 1, 2, ... across every block kind); writers renumber as their API requires.


@dataclass(frozen=True, slots=True)
class Started:
    """The reply has begun. `usage` holds the input side when the upstream tells it early."""

    id: str
    model: str
    usage: CanonicalUsage | None = None
    created: int = 0


@dataclass(frozen=True, slots=True)
class BlockStarted:
    """Block `index` opens: text, a tool call (with its id and name) or thinking."""

    index: int
    kind: Literal["text", "tool_call", "thinking"]
    call_id: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    """More text for block `index`."""

    index: int
    text: str


@dataclass(frozen=True, slots=True)
class ArgumentsDelta:
    """More JSON text of the tool call's arguments in block `index`."""

    index: int
    json: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    """More reasoning text (or its signature) for block `index`."""

    index: int
    text: str = ""
    signature: str | None = None


@dataclass(frozen=True, slots=True)
class BlockStopped:
    """Block `index` is complete."""

    index: int


@dataclass(frozen=True, slots=True)
class Finished:
    """The model stopped; usage may still follow."""

    stop: Stop
    stop_sequence: str | None = None


@dataclass(frozen=True, slots=True)
class UsageReported:
    """The reply's full token usage (cumulative, replacing anything reported before)."""

    usage: CanonicalUsage


@dataclass(frozen=True, slots=True)
class Ended:
    """The upstream's stream is over; a writer flushes whatever it held back."""


@dataclass(frozen=True, slots=True)
class StreamError:
    """The upstream reported an error inside the stream."""

    kind: Literal[
        "overloaded", "rate_limited", "server", "bad_request", "auth", "billing", "context"
    ]
    message: str


Event = (
    Started
    | BlockStarted
    | TextDelta
    | ArgumentsDelta
    | ThinkingDelta
    | BlockStopped
    | Finished
    | UsageReported
    | Ended
    | StreamError
)

AFTER_THE_FINISH = (BlockStarted, TextDelta, ArgumentsDelta, ThinkingDelta, BlockStopped, Finished)
"""Events a writer drops once the model has finished: content, and a second finish. An
upstream that sends them has broken its own stream; the reply the client gets is the one
that finished."""
