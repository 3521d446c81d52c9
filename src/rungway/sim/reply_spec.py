"""How a simulated upstream's replies are generated and paced, and the tools its model
calls."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCallSpec(_Frozen):
    """A tool the simulated model calls, with the input it passes.

    `input` is the tool's JSON arguments, e.g. `{command: "echo hi", description: "Say
    hi"}` for Claude Code's `Bash` or `{command: "echo hi"}` for Codex's `shell_command`.
    """

    name: str = Field(min_length=1, max_length=128)
    input: dict[str, Any] = Field(default_factory=dict)


class ResponseSpec(_Frozen):
    """How replies are generated and paced.

    With `text` unset the reply is `output_tokens` deterministic words; with `text` set
    each whitespace-separated word is one output token. Pacing uses real time: a stream
    sends its head after `first_byte_ms` and then one frame every `chunk_interval_ms`;
    a non-streamed reply arrives when its last chunk would have.

    With `tool_calls` listed the model uses tools: a request that offers one of them (the
    first listed wins) and whose last turn is not a tool result gets a call to it; a
    request whose last turn carries a tool result gets text quoting that result's first
    200 characters. Requests offering none of them get the usual text.
    """

    text: str | None = None
    tool_calls: tuple[ToolCallSpec, ...] = ()
    output_tokens: int = Field(default=24, ge=1)
    chunk_tokens: int = Field(default=4, ge=1)
    first_byte_ms: float = Field(default=0, ge=0)
    chunk_interval_ms: float = Field(default=0, ge=0)
    thought_tokens: int = Field(default=0, ge=0)
    """Tokens a Gemini reply spends thinking, reported as `thoughtsTokenCount` apart from
    the candidates' count, unless the request sets `thinkingBudget: 0`."""
