"""Anthropic Messages requests and replies, read into and written from the canonical form.

`ANTHROPIC` is this API's codec. Its request writer serves clients of other APIs that
reach a Claude upstream, so it makes their conversations acceptable to Anthropic: system
text at the top, same-role turns merged, tool results first in the user turn after their
calls (in call order), `max_tokens` always set and above the thinking budget, and no
thinking where Anthropic would reject it. Structured output goes as `output_config.format`,
or through a forced tool where the model has no output format (`anthropic_output`).
"""

from __future__ import annotations

import base64
import itertools
import re
from typing import Any, Literal
from urllib.parse import unquote_to_bytes

import orjson

from rungway.protocol.api import Api
from rungway.translate import anthropic_output
from rungway.translate.anthropic_stream import (
    AnthropicStreamReader,
    AnthropicStreamWriter,
    read_reply,
    read_thinking_block,
    tool_use_block,
    tool_use_id,
    write_reply,
)
from rungway.translate.canonical import (
    Image,
    Message,
    OutputFormat,
    Part,
    Reasoning,
    Reply,
    Request,
    Text,
    Tool,
    ToolCall,
    ToolChoice,
    ToolNamed,
    ToolResult,
)
from rungway.translate.codec import StreamReader

DEFAULT_MAX_TOKENS = 8192
"""`max_tokens` for an Anthropic upstream when the client set none (Anthropic requires it)."""

EFFORT_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}
"""The thinking budget written for each reasoning effort."""

MIN_THINKING_BUDGET = 1024

ADAPTIVE_ONLY_FROM = (4, 7)
"""Claude versions from which Anthropic rejects `temperature`, `top_p` and a thinking
`budget_tokens` (400 "deprecated for this model"); they take adaptive thinking and an
effort level instead. https://platform.claude.com/docs/en/about-claude/models/migration-guide"""

DROPPED_FIELDS = frozenset(
    {
        "include_usage",  # Anthropic streams always report usage
        "thinking.unsigned",  # thinking without an Anthropic signature cannot be sent back
        "thinking.signature",  # the stream writer serves other providers' signatures: none
        "redacted_thinking.stream",  # a streamed redacted block's data has no canonical event
        "temperature.with_thinking",  # Anthropic allows only temperature 1 with thinking
        "top_p.with_thinking",  # and top_p of at least 0.95
        "reasoning.with_forced_tool",  # thinking cannot be combined with a forced tool
        "reasoning.after_unsigned_tool_turn",  # a last tool turn without a thinking block
        "temperature.newer_models",  # Claude 4.7 and later reject any temperature
        "top_p.newer_models",  # and any top_p
        "reasoning.budget_tokens.newer_models",  # they take an effort level, not a budget
        "stop.whitespace",  # Anthropic rejects stop sequences of only whitespace
        "text.whitespace",  # and text blocks of only whitespace
        "created",  # Anthropic messages carry no timestamp
        "reasoning_tokens",  # already inside output_tokens; Anthropic has no separate count
    }
)
"""Canonical fields the Anthropic writers leave out on purpose (request fields the reader
cannot carry are named per request in `Request.dropped`)."""

_READ_FIELDS = frozenset(
    {"model", "messages", "system", "max_tokens", "temperature", "top_p", "stop_sequences"}
    | {"stream", "thinking", "output_config", "tools", "tool_choice", "metadata"}
)
_TOOL_FIELDS = frozenset({"type", "name", "description", "input_schema", "cache_control"})
_CLAUDE_VERSION = re.compile(r"claude-(?:[a-z]+-)?(\d+)(?:[-.](\d{1,2})(?!\d))?")
_IMAGE_SIGNATURES = {"iVBOR": "image/png", "/9j/": "image/jpeg", "R0lGOD": "image/gif"}


class AnthropicCodec:
    """The Anthropic Messages API's side of translation."""

    api: Api = Api.ANTHROPIC_MESSAGES

    def read_request(self, body: dict[str, Any]) -> Request:
        """A client's Messages request as a canonical request."""
        if not isinstance(body.get("model"), str):
            raise ValueError("model: Field required (a string)")
        dropped = [key for key in body if key not in _READ_FIELDS]
        system = list(_read_system(body.get("system"), dropped))
        messages: list[Message] = []
        for number, message in enumerate(body.get("messages") or []):
            if not isinstance(message, dict):
                raise ValueError(f"messages.{number}: must be an object with `role`, `content`")
            role = message.get("role")
            if role == "system":  # a mid-conversation system turn joins the system text
                system.extend(_read_system(message.get("content"), dropped))
                continue
            if role not in ("user", "assistant"):
                raise ValueError(f"messages.{number}.role: must be 'user' or 'assistant'")
            parts = _read_content(message.get("content"), f"messages.{number}", dropped)
            if parts:
                messages.append(Message(role, parts))
        tool_choice, parallel = _read_tool_choice(body.get("tool_choice"), dropped)
        metadata = body.get("metadata") or {}
        dropped += [f"metadata.{key}" for key in metadata if key != "user_id"]
        return Request(
            model=body["model"],
            messages=tuple(messages),
            system=tuple(system),
            tools=_read_tools(body.get("tools") or [], dropped),
            tool_choice=tool_choice,
            parallel_tool_calls=parallel,
            max_tokens=body.get("max_tokens"),
            temperature=body.get("temperature"),
            temperature_max=1.0,
            top_p=body.get("top_p"),
            stop=tuple(_strings(body.get("stop_sequences"))),
            stream=bool(body.get("stream")),
            reasoning=_read_thinking(body, dropped),
            output_format=_read_output_format(body.get("output_config"), dropped),
            user=metadata.get("user_id"),
            dropped=tuple(dict.fromkeys(dropped)),
        )

    def write_request(self, request: Request, *, model: str) -> dict[str, Any]:
        """The Messages request for `request`, asking an Anthropic upstream for `model`."""
        messages = _write_messages(request.messages)
        output = request.output_format
        native = output is not None and anthropic_output.native(output, model)
        forced = output is not None and not native
        budget = None if forced else _thinking_budget(request, messages)
        version = _claude_version(model)
        newer = version is not None and version >= ADAPTIVE_ONLY_FROM
        max_tokens = request.max_tokens or DEFAULT_MAX_TOKENS
        if budget is not None and not newer and max_tokens <= budget:
            max_tokens = budget + MIN_THINKING_BUDGET
        body: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
        system = [_write_text(text) for text in request.system if text.text.strip()]
        if system:
            body["system"] = system
        body["messages"] = messages
        config: dict[str, Any] = {}
        if budget is not None and newer:
            body["thinking"] = {"type": "adaptive"}
            config["effort"] = _effort(request.reasoning, budget)
        elif budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        if output is not None and native:
            config["format"] = anthropic_output.output_format(output)
        if config:
            body["output_config"] = config
        body.update(_write_sampling(request, thinking=budget is not None, newer=newer))
        body.update(_write_tools(request, forced=forced))
        if request.user:
            body["metadata"] = {"user_id": request.user}
        return body

    def read_reply(self, body: dict[str, Any], request: Request) -> Reply:
        """An Anthropic upstream's message as a canonical reply."""
        reply = read_reply(body)
        return anthropic_output.reply_text(reply) if anthropic_output.emulated(request) else reply

    def write_reply(self, reply: Reply, request: Request) -> dict[str, Any]:
        """The Messages reply an Anthropic client gets for `reply`."""
        return write_reply(reply, request.model)

    def stream_reader(self, request: Request) -> StreamReader:
        """A reader for one Anthropic upstream stream."""
        reader = AnthropicStreamReader()
        if anthropic_output.emulated(request):
            return anthropic_output.OutputStreamReader(reader)
        return reader

    def stream_writer(self, request: Request) -> AnthropicStreamWriter:
        """A writer for one Anthropic client stream."""
        return AnthropicStreamWriter(request)


ANTHROPIC = AnthropicCodec()
"""The Anthropic Messages codec."""


def _read_system(system: Any, dropped: list[str]) -> list[Text]:
    if system is None:
        return []
    if isinstance(system, str):
        return [Text(system)] if system else []
    if not isinstance(system, list):
        raise ValueError("system: must be a string or an array of text blocks")
    texts = []
    for block in system:
        if isinstance(block, dict) and block.get("type") == "text":
            texts.append(Text(str(block.get("text", "")), block.get("cache_control")))
        else:
            dropped.append("system.non_text")
    return texts


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [item for item in value or () if isinstance(item, str)]


def _read_content(content: Any, where: str, dropped: list[str]) -> tuple[Part, ...]:
    if isinstance(content, str):
        return (Text(content),)
    if not isinstance(content, list):
        raise ValueError(f"{where}.content: must be a string or an array of content blocks")
    parts: list[Part] = []
    for number, block in enumerate(content):
        if not isinstance(block, dict):
            raise ValueError(f"{where}.content.{number}: must be a content block object")
        part = _read_block(block, f"{where}.content.{number}", dropped)
        if part is not None:
            parts.append(part)
    return tuple(parts)


def _read_block(block: dict[str, Any], where: str, dropped: list[str]) -> Part | None:
    kind = block.get("type")
    if kind != "text" and block.get("cache_control"):
        dropped.append("messages.cache_control")
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str):
            raise ValueError(f"{where}.text: Field required (a string)")
        if block.get("citations"):
            dropped.append("messages.citations")
        return Text(text, block.get("cache_control"))
    if kind == "image":
        return _read_image(block, dropped)
    if kind == "tool_use":
        call_id, name = block.get("id"), block.get("name")
        if not isinstance(call_id, str) or not isinstance(name, str):
            raise ValueError(f"{where}: a tool_use block needs `id` and `name` strings")
        return ToolCall(call_id, name, orjson.dumps(block.get("input", {})).decode())
    if kind == "tool_result":
        return _read_tool_result(block, where, dropped)
    if kind in ("thinking", "redacted_thinking"):
        return read_thinking_block(block)
    dropped.append(f"messages.{kind}")  # documents, server tool blocks, newer kinds
    return None


def _read_image(block: dict[str, Any], dropped: list[str]) -> Image | None:
    source = block.get("source") or {}
    kind = source.get("type")
    if kind == "base64":
        return Image(media_type=source.get("media_type"), data=source.get("data"))
    if kind == "url":
        return Image(url=source.get("url"))
    dropped.append(f"messages.image.{kind}")  # uploaded files have no canonical form
    return None


def _read_tool_result(block: dict[str, Any], where: str, dropped: list[str]) -> ToolResult:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str):
        raise ValueError(f"{where}.tool_use_id: Field required (a string)")
    content = block.get("content")
    parts: list[Text | Image] = []
    if isinstance(content, str):
        parts = [Text(content)] if content else []
    elif isinstance(content, list):
        for item in content:
            kind = item.get("type") if isinstance(item, dict) else None
            if kind == "text":
                parts.append(Text(str(item.get("text", "")), item.get("cache_control")))
            elif kind == "image" and (image := _read_image(item, dropped)) is not None:
                parts.append(image)
            elif kind != "image":
                dropped.append(f"messages.tool_result.{kind}")
    return ToolResult(call_id, tuple(parts), is_error=bool(block.get("is_error")))


def _read_tools(tools: list[Any], dropped: list[str]) -> tuple[Tool, ...]:
    read: list[Tool] = []
    for number, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise ValueError(f"tools.{number}: must be a tool object")
        kind = tool.get("type")
        if kind not in (None, "custom"):
            dropped.append(f"tools.{kind}")  # a server tool that Anthropic itself runs
            continue
        name, schema = tool.get("name"), tool.get("input_schema")
        if not isinstance(name, str) or not isinstance(schema, dict):
            raise ValueError(f"tools.{number}: needs a `name` string and an `input_schema`")
        dropped += [f"tools.{key}" for key in tool if key not in _TOOL_FIELDS]
        if tool.get("cache_control"):
            dropped.append("tools.cache_control")
        read.append(Tool(name, tool.get("description"), schema))
    return tuple(read)


def _read_tool_choice(choice: Any, dropped: list[str]) -> tuple[ToolChoice | None, bool | None]:
    if not isinstance(choice, dict):
        return None, None
    parallel = False if choice.get("disable_parallel_tool_use") else None
    kind = choice.get("type")
    if kind == "tool" and isinstance(choice.get("name"), str):
        return ToolNamed(choice["name"]), parallel
    named: dict[Any, ToolChoice] = {"auto": "auto", "any": "required", "none": "none"}
    if kind in named:
        return named[kind], parallel
    dropped.append("tool_choice")
    return None, parallel


def _read_output_format(config: Any, dropped: list[str]) -> OutputFormat | None:
    """`output_config.format` (a `json_schema`) as an output format."""
    spec = config.get("format") if isinstance(config, dict) else None
    if spec is None:
        return None
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if not isinstance(schema, dict) or spec.get("type") != "json_schema":
        raise ValueError("output_config.format: must be {type: json_schema, schema: {...}}")
    return OutputFormat(schema=schema)


def _read_thinking(body: dict[str, Any], dropped: list[str]) -> Reasoning | None:
    thinking = body.get("thinking") or {}
    config = body.get("output_config") or {}
    efforts: dict[Any, Literal["low", "medium", "high"]] = {"xhigh": "high", "max": "high"}
    efforts.update(low="low", medium="medium", high="high")
    effort = efforts.get(config.get("effort"))
    dropped += [f"output_config.{key}" for key in config if key not in ("effort", "format")]
    dropped += [f"thinking.{key}" for key in thinking if key not in ("type", "budget_tokens")]
    kind = thinking.get("type")
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        return Reasoning(effort=effort, budget_tokens=budget)
    if kind == "adaptive":  # the model decides how much to think; Anthropic's default is high
        return Reasoning(effort=effort or "high")
    if kind not in (None, "disabled"):
        dropped.append("thinking")
    if effort is not None:
        dropped.append("output_config.effort")
    return None


def _thinking_budget(request: Request, messages: list[dict[str, Any]]) -> int | None:
    reasoning = request.reasoning
    if reasoning is None:
        return None
    budget = reasoning.budget_tokens
    if budget is None and reasoning.effort is not None:
        budget = EFFORT_BUDGETS[reasoning.effort]
    if not budget or budget < 0:
        return None
    # Anthropic rejects thinking with a forced tool, and when the last assistant turn used
    # tools without starting with a signed thinking block (its thinking came from another
    # provider or was never kept). https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking
    if request.tools and request.tool_choice not in (None, "auto", "none"):
        return None
    last: list[dict[str, Any]] = next(
        (m["content"] for m in reversed(messages) if m["role"] == "assistant"), []
    )
    calls = any(block["type"] == "tool_use" for block in last)
    if calls and last[0]["type"] not in ("thinking", "redacted_thinking"):
        return None
    return max(budget, MIN_THINKING_BUDGET)


def _claude_version(model: str) -> tuple[int, int] | None:
    """(major, minor) of a Claude model id: `claude-opus-4-7` and `claude-3-5-sonnet-x` alike."""
    match = _CLAUDE_VERSION.search(model)
    return None if match is None else (int(match[1]), int(match[2] or 0))


def _effort(reasoning: Reasoning | None, budget: int) -> Literal["low", "medium", "high"]:
    effort = reasoning.effort if reasoning is not None else None
    if effort is None:
        effort = "low" if budget <= 2048 else "medium" if budget <= 8192 else "high"
    return "low" if effort == "minimal" else effort


def _write_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    for message in messages:
        blocks = [block for part in message.parts if (block := _write_part(part)) is not None]
        if not blocks:
            continue
        if wire and wire[-1]["role"] == message.role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": message.role, "content": blocks})
    for previous, current in itertools.pairwise(wire):
        if previous["role"] == "assistant":
            calls = [block["id"] for block in previous["content"] if block["type"] == "tool_use"]
            current["content"] = _results_first(current["content"], calls)
    if wire and wire[-1]["role"] == "assistant" and wire[-1]["content"][-1]["type"] == "text":
        # A final assistant turn (a prefill) may not end with whitespace.
        last = wire[-1]["content"][-1]
        last["text"] = last["text"].rstrip() or last["text"]
    return wire


def _results_first(blocks: list[dict[str, Any]], calls: list[str]) -> list[dict[str, Any]]:
    """Tool results lead the user turn after the calls, in the order of the calls."""
    rank = {call_id: number for number, call_id in enumerate(calls)}
    results = [block for block in blocks if block["type"] == "tool_result"]
    results.sort(key=lambda block: rank.get(block["tool_use_id"], len(rank)))
    return results + [block for block in blocks if block["type"] != "tool_result"]


def _write_part(part: Part) -> dict[str, Any] | None:
    if isinstance(part, Text):
        # Anthropic rejects text blocks that are empty or only whitespace.
        return _write_text(part) if part.text.strip() else None
    if isinstance(part, Image):
        return _write_image(part)
    if isinstance(part, ToolCall):
        return tool_use_block(part)
    if isinstance(part, ToolResult):
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id(part.call_id)}
        content = [item for content in part.content if (item := _write_part(content))]
        if content:
            block["content"] = content
        if part.is_error:
            block["is_error"] = True
        return block
    if part.origin != "anthropic":
        return None  # unsigned or foreign thinking: Anthropic would reject it
    if part.redacted:
        return {"type": "redacted_thinking", "data": part.redacted}
    if part.signature:
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    return None


def _write_text(text: Text) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text.text}
    if text.cache is not None:
        block["cache_control"] = text.cache
    return block


def _write_image(image: Image) -> dict[str, Any] | None:
    media_type, data = image.media_type, image.data
    if data is None and image.url and image.url.startswith("data:"):
        media_type, data = _parse_data_url(image.url)
    if data is not None:
        media_type = {"image/jpg": "image/jpeg"}.get(media_type or "", media_type)
        if not media_type:
            sniffed = (
                kind for prefix, kind in _IMAGE_SIGNATURES.items() if data.startswith(prefix)
            )
            media_type = next(sniffed, "image/webp" if data.startswith("UklGR") else "image/png")
        source = {"type": "base64", "media_type": media_type, "data": data}
        return {"type": "image", "source": source}
    if image.url:
        return {"type": "image", "source": {"type": "url", "url": image.url}}
    return None


def _parse_data_url(url: str) -> tuple[str | None, str]:
    """`data:<media>[;base64],<data>` as its media type and base64 data."""
    header, comma, payload = url[len("data:") :].partition(",")
    if not comma:
        raise ValueError("image: a data URL needs a comma before its data")
    media_type, *params = header.split(";")
    if "base64" not in params:
        payload = base64.b64encode(unquote_to_bytes(payload)).decode()
    return media_type or None, payload


def _write_tools(request: Request, *, forced: bool) -> dict[str, Any]:
    """`tools` and `tool_choice`, with the output tool when structured output is `forced`."""
    tools = [_write_tool(tool) for tool in request.tools]
    if forced and request.output_format is not None:
        tools.append(anthropic_output.output_tool(request.output_format))
    if not tools:
        return {}
    parallel = request.parallel_tool_calls
    choice: dict[str, Any] | None
    if forced and not isinstance(request.tool_choice, ToolNamed):
        choice = anthropic_output.forced_choice(request)
        if parallel is False:
            choice["disable_parallel_tool_use"] = True
    else:
        choice = _write_tool_choice(request.tool_choice, parallel)
    return {"tools": tools, "tool_choice": choice} if choice is not None else {"tools": tools}


def _write_tool(tool: Tool) -> dict[str, Any]:
    schema = tool.parameters or {"type": "object", "properties": {}}
    if "type" not in schema:
        schema = {"type": "object", **schema}
    written: dict[str, Any] = {"name": tool.name, "input_schema": schema}
    if tool.description:
        written["description"] = tool.description
    return written


def _write_tool_choice(choice: ToolChoice | None, parallel: bool | None) -> dict[str, Any] | None:
    if choice in ("auto", "none"):
        written: dict[str, Any] = {"type": choice}
    elif choice == "required":
        written = {"type": "any"}
    elif isinstance(choice, ToolNamed):
        written = {"type": "tool", "name": choice.name}
    elif parallel is False:
        written = {"type": "auto"}
    else:
        return None
    if parallel is False and written["type"] != "none":
        written["disable_parallel_tool_use"] = True
    return written


def _write_sampling(request: Request, *, thinking: bool, newer: bool) -> dict[str, Any]:
    """Temperature (clamped to Anthropic's 0..1), top_p, stop sequences and stream."""
    body: dict[str, Any] = {}
    if request.temperature is not None and not newer:
        temperature = max(0.0, min(request.temperature, 1.0))
        if not thinking or temperature == 1.0:
            body["temperature"] = temperature
    if request.top_p is not None and not newer and (not thinking or request.top_p >= 0.95):
        body["top_p"] = request.top_p
    stop = [sequence for sequence in request.stop if sequence.strip()]
    if stop:
        body["stop_sequences"] = stop
    if request.stream:
        body["stream"] = True
    return body
