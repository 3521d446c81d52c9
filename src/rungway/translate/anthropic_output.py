"""Structured output to Anthropic: the API's own output format, or a forced tool standing in.

Anthropic constrains a reply to a JSON Schema with `output_config.format` (`json_schema`)
from Claude 4.5 (and Opus 4.1) on. It has no bare JSON mode, and older models have no output
format at all; for those the writer emulates it the documented way, with a tool whose input
schema is the schema, which the model is made to call
(https://platform.claude.com/docs/en/build-with-claude/structured-outputs,
https://platform.claude.com/docs/en/agents-and-tools/tool-use/implement-tool-use). The
call's arguments are the JSON the client asked for, so the readers here turn that call back
into the reply's text, and its `tool_use` stop into an ordinary end.

When the client also declared tools, the model must call some tool (`any`): one of the
client's, which goes back as a tool call, or the output tool, which goes back as the
answer. Anthropic allows no extended thinking with a forced tool, so thinking is left out
(`reasoning.with_forced_tool`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rungway.models.capabilities import Structured, model_capabilities
from rungway.protocol.sse import SseEvent
from rungway.translate.canonical import (
    ArgumentsDelta,
    BlockStarted,
    Event,
    Finished,
    OutputFormat,
    Reply,
    Request,
    Stop,
    Text,
    TextDelta,
    ToolCall,
)
from rungway.translate.codec import StreamReader

OUTPUT_TOOL = "json_output"
"""The tool that stands in for structured output; its arguments are the reply."""
_ANY_OBJECT = {"type": "object"}


def native(output: OutputFormat, model: str) -> bool:
    """True when `model` takes `output` as an output format rather than through the tool.

    A model nothing is known of is taken to have one: unknown means able."""
    structured = model_capabilities(model).structured
    return output.schema is not None and structured in (None, Structured.SCHEMA)


def output_format(output: OutputFormat) -> dict[str, Any]:
    """`output_config.format` for `output` (which has a schema)."""
    return {"type": "json_schema", "schema": output.schema}


def output_tool(output: OutputFormat) -> dict[str, Any]:
    """The tool whose input is the reply: any JSON object when no schema was asked for."""
    return {
        "name": OUTPUT_TOOL,
        "description": "Give your answer as this tool's input: it is the JSON the user asked for.",
        "input_schema": output.schema or _ANY_OBJECT,
    }


def forced_choice(request: Request) -> dict[str, Any]:
    """The tool choice that makes the model answer through the output tool.

    With tools of the client's it may call one of those instead; a named tool stays forced."""
    if not request.tools or request.tool_choice == "none":
        return {"type": "tool", "name": OUTPUT_TOOL}
    return {"type": "any"}


def emulated(request: Request) -> bool:
    """True when `request` asks for structured output and the output tool may answer it."""
    return request.output_format is not None and all(t.name != OUTPUT_TOOL for t in request.tools)


def reply_text(reply: Reply) -> Reply:
    """`reply` with the output tool's call as text, ended as a plain answer."""
    parts = tuple(
        Text(part.arguments) if isinstance(part, ToolCall) and part.name == OUTPUT_TOOL else part
        for part in reply.parts
    )
    if parts == reply.parts:
        return reply
    calls = any(isinstance(part, ToolCall) for part in parts)
    stop = reply.stop if calls or reply.stop is not Stop.TOOL_USE else Stop.END
    return dataclasses.replace(reply, parts=parts, stop=stop)


class OutputStreamReader:
    """Wraps an Anthropic stream reader: the output tool's block streams as text."""

    __slots__ = ("_calls", "_inner", "_output")

    def __init__(self, inner: StreamReader) -> None:
        self._inner = inner
        self._output: set[int] = set()
        self._calls = False

    def read(self, event: SseEvent) -> list[Event]:
        """The inner reader's events, with the output tool's turned into text."""
        return [self._rewrite(read) for read in self._inner.read(event)]

    def _rewrite(self, event: Event) -> Event:
        if isinstance(event, BlockStarted) and event.kind == "tool_call":
            if event.name == OUTPUT_TOOL:
                self._output.add(event.index)
                return BlockStarted(event.index, "text")
            self._calls = True
        elif isinstance(event, ArgumentsDelta) and event.index in self._output:
            return TextDelta(event.index, event.json)
        elif (
            isinstance(event, Finished)
            and event.stop is Stop.TOOL_USE
            and self._output
            and not self._calls
        ):
            return Finished(Stop.END)
        return event
