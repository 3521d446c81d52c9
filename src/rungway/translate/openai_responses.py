"""OpenAI Responses requests and replies, read into and written from the canonical form.

A Responses conversation is a flat list of items (messages, function calls, their
outputs, reasoning); canonical turns group them: an assistant turn is its reasoning, text
and calls together, and consecutive tool outputs form one user turn. Streams are in
`openai_responses_stream`, with the response shapes both share.

Structured output is `text.format`: `json_schema` with the schema, its name (`output` when
the client gave none) and `strict`, or `json_object` when no schema was asked for.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import orjson

from rungway.protocol import json_values
from rungway.protocol.api import Api
from rungway.protocol.openai_responses import (
    function_call_item,
    function_tool,
    message_item,
    response_object,
    responses_id,
    tool_choice,
)
from rungway.translate.canonical import (
    TOOL_MODES,
    Image,
    Message,
    OutputFormat,
    Part,
    Reasoning,
    Reply,
    Request,
    Text,
    Thinking,
    Tool,
    ToolCall,
    ToolChoice,
    ToolNamed,
    ToolResult,
)
from rungway.translate.codec import StreamReader, StreamWriter
from rungway.translate.names import restore_tool_name, short_tool_name
from rungway.translate.openai_chat import json_schema_fields, read_json_schema
from rungway.translate.openai_responses_stream import (
    ResponsesStreamReader,
    ResponsesStreamWriter,
    incomplete_reason,
    instructions,
    read_stop,
    read_thinking,
    read_usage,
    reasoning_output,
    request_echo,
    write_usage,
)

IGNORED_REQUEST_FIELDS = (
    "store",
    "previous_response_id",
    "include",
    "prompt_cache_key",
    "prompt_cache_retention",
    "truncation",
    "metadata",
    "service_tier",
    "background",
    "max_tool_calls",
    "prompt",
    "conversation",
    "top_logprobs",
    "safety_identifier",
    "stream_options",
)
"""Request fields with no canonical meaning: read past, and named in `Request.dropped`."""

DROPPED_FIELDS = frozenset(
    {
        *IGNORED_REQUEST_FIELDS,
        # Read side: parts of a client's request the canonical form cannot carry.
        "reasoning.summary",
        "text.verbosity",
        "tools.strict",
        "content.input_file",
        "content.input_image.file_id",
        # Write side: canonical parts a Responses upstream has no place for.
        "stop",
        "cache_control",
        "thinking",
        "assistant.image",
    }
)
"""Every field dropped on purpose. A request's `dropped` also names, by type, the tools
(`tools.<type>`), tool choices (`tool_choice.<type>`), input items (`input.<type>`) and
content parts (`content.<type>`) it had that are not functions, messages or text and images.
"""

_Effort = Literal["minimal", "low", "medium", "high"]
_EFFORTS: dict[object, _Effort] = {
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",
}
_DATA_URL = re.compile(r"data:(?P<type>[^;,]+);base64,(?P<data>.*)", re.DOTALL)


class _Turns:
    """Canonical messages built from input items, grouping items that form one turn."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.system: list[Text] = []
        self.dropped: dict[str, None] = {}

    def add(self, role: str, parts: list[Part], *, join: bool) -> None:
        """Add `parts` as a `role` turn, onto the last turn when `join` and it is `role`'s."""
        if not parts:
            return
        last = self.messages[-1] if self.messages else None
        if join and last is not None and last.role == role:
            self.messages[-1] = Message(last.role, (*last.parts, *parts))
        else:
            self.messages.append(Message("user" if role == "user" else "assistant", tuple(parts)))

    def read(self, item: dict[str, Any]) -> None:
        """Take one input item."""
        kind = item.get("type", "message")
        if kind == "message":
            self._message(item)
        elif kind == "function_call":
            call_id, name = item.get("call_id"), item.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str) or not name:
                raise ValueError("a `function_call` input item needs a `call_id` and a `name`")
            arguments = item.get("arguments")
            text = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
            self.add("assistant", [ToolCall(call_id, name, text or "{}")], join=True)
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if not isinstance(call_id, str):
                raise ValueError("a `function_call_output` input item needs a `call_id`")
            result = ToolResult(call_id, tuple(self._content(item.get("output"))))
            last = self.messages[-1] if self.messages else None
            grouped = last is not None and all(isinstance(p, ToolResult) for p in last.parts)
            self.add("user", [result], join=grouped)
        elif kind == "reasoning":
            thinking = read_thinking(item)
            if thinking.text or thinking.signature or thinking.redacted:
                self.add("assistant", [thinking], join=True)
        else:
            self.dropped[f"input.{kind}"] = None

    def _message(self, item: dict[str, Any]) -> None:
        role = item.get("role")
        parts = self._content(item.get("content"))
        if role in ("system", "developer"):
            self.system += [part for part in parts if isinstance(part, Text)]
        elif role in ("user", "assistant"):
            self.add(role, list(parts), join=role == "assistant")
        else:
            roles = "user, assistant, system or developer"
            raise ValueError(f"an input message's role must be {roles}, not {role!r}")

    def _content(self, content: object) -> list[Text | Image]:
        if isinstance(content, str):
            return [Text(content)] if content else []
        if content is None:
            return []
        if not isinstance(content, list):
            return [Text(orjson.dumps(content).decode())]
        parts: list[Text | Image] = []
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in ("input_text", "output_text", "text", "refusal"):
                text = part.get("refusal" if kind == "refusal" else "text")
                if isinstance(text, str) and text:
                    parts.append(Text(text))
            elif kind == "input_image":
                image = _image(part.get("image_url"))
                if image is None:
                    self.dropped["content.input_image.file_id"] = None
                else:
                    parts.append(image)
            else:
                self.dropped[f"content.{kind}"] = None
        return parts


def _image(url: object) -> Image | None:
    if isinstance(url, dict):
        url = url.get("url")
    if not isinstance(url, str) or not url:
        return None
    match = _DATA_URL.fullmatch(url)
    if match is not None:
        return Image(media_type=match["type"], data=match["data"])
    return Image(url=url)


def read_request(body: dict[str, Any]) -> Request:
    """A Responses request body as a canonical request."""
    turns = _Turns()
    dropped = turns.dropped
    for name in IGNORED_REQUEST_FIELDS:
        if body.get(name) is not None:
            dropped[name] = None
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        turns.system.append(Text(body["instructions"]))
    items = body.get("input")
    if isinstance(items, str):
        turns.add("user", [Text(items)] if items else [], join=False)
    else:
        for item in items or ():
            turns.read(item)
    tools = [tool for tool in (_tool(each, dropped) for each in body.get("tools") or ()) if tool]
    reasoning = body.get("reasoning")
    if not isinstance(reasoning, dict):
        reasoning = {}
    if reasoning.get("summary") is not None:
        dropped["reasoning.summary"] = None
    return Request(
        model=str(body["model"]),
        messages=tuple(turns.messages),
        system=tuple(turns.system),
        tools=tuple(tools),
        tool_choice=_read_tool_choice(body.get("tool_choice"), dropped),
        parallel_tool_calls=json_values.flag(body.get("parallel_tool_calls")),
        max_tokens=json_values.whole(body.get("max_output_tokens")),
        temperature=json_values.number(body.get("temperature")),
        temperature_max=2.0,
        top_p=json_values.number(body.get("top_p")),
        stream=body.get("stream") is True,
        reasoning=_read_reasoning(reasoning.get("effort")),
        output_format=_read_text_format(body.get("text"), dropped),
        user=json_values.text(body.get("user")),
        dropped=tuple(dropped),
    )


def _tool(tool: object, dropped: dict[str, None]) -> Tool | None:
    if not isinstance(tool, dict):
        return None
    if tool.get("type") != "function":
        dropped[f"tools.{tool.get('type')}"] = None
        return None
    # Some clients nest the function as Chat Completions does; take that form too.
    fields = tool["function"] if isinstance(tool.get("function"), dict) else tool
    name = fields.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("every function tool needs a `name`")
    if fields.get("strict"):
        dropped["tools.strict"] = None
    parameters = fields.get("parameters")
    if not isinstance(parameters, dict):
        parameters = {"type": "object", "properties": {}}
    return Tool(name, json_values.text(fields.get("description")), parameters)


def _read_tool_choice(choice: object, dropped: dict[str, None]) -> ToolChoice | None:
    if isinstance(choice, str) and choice in TOOL_MODES:
        return TOOL_MODES[choice]
    if isinstance(choice, dict):
        if choice.get("type") == "function" and isinstance(choice.get("name"), str):
            return ToolNamed(str(choice["name"]))
        dropped[f"tool_choice.{choice.get('type')}"] = None
    return None


def _read_text_format(text: object, dropped: dict[str, None]) -> OutputFormat | None:
    """`text.format` (`text`, `json_object` or `json_schema`) as an output format."""
    if not isinstance(text, dict):
        return None
    for key in text:
        if key != "format" and text[key] is not None:
            dropped[f"text.{key}"] = None
    spec = text.get("format")
    kind = spec.get("type") if isinstance(spec, dict) else None
    if kind == "json_object":
        return OutputFormat()
    if kind == "json_schema":
        assert isinstance(spec, dict)
        return read_json_schema(spec)
    if kind not in (None, "text"):
        dropped[f"text.format.{kind}"] = None
    return None


def write_text_format(output: OutputFormat) -> dict[str, Any]:
    """Responses' `text.format` for an output format."""
    if output.schema is None:
        return {"type": "json_object"}
    return {"type": "json_schema", **json_schema_fields(output)}


def _read_reasoning(effort: object) -> Reasoning | None:
    # `none` asks for no reasoning, which is what leaving it out means to every writer.
    level = _EFFORTS.get(effort)
    return Reasoning(effort=level) if level is not None else None


def write_request(request: Request, *, model: str) -> dict[str, Any]:
    """The Responses body for `request`, asking for `model`; nothing is stored upstream."""
    body: dict[str, Any] = {"model": model}
    text = instructions(request)
    if text is not None:
        body["instructions"] = text
    body["input"] = [item for message in request.messages for item in _items(message)]
    if request.tools:
        body["tools"] = [
            function_tool(short_tool_name(tool.name), tool.description, tool.parameters)
            for tool in request.tools
        ]
    if request.tool_choice is not None:
        choice = request.tool_choice
        body["tool_choice"] = (
            tool_choice(name=short_tool_name(choice.name))
            if isinstance(choice, ToolNamed)
            else tool_choice(choice)
        )
    if request.parallel_tool_calls is not None:
        body["parallel_tool_calls"] = request.parallel_tool_calls
    if request.max_tokens is not None:
        body["max_output_tokens"] = request.max_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    effort = _effort(request.reasoning)
    if effort is not None:
        body["reasoning"] = {"effort": effort}
    if request.output_format is not None:
        body["text"] = {"format": write_text_format(request.output_format)}
    if request.user is not None:
        body["user"] = request.user
    body["stream"] = request.stream
    body["store"] = False
    return body


def _effort(reasoning: Reasoning | None) -> str | None:
    if reasoning is None:
        return None
    if reasoning.effort is not None:
        return reasoning.effort
    if reasoning.budget_tokens is None:
        return None
    if reasoning.budget_tokens <= 2048:
        return "low"
    return "medium" if reasoning.budget_tokens <= 8192 else "high"


def _items(message: Message) -> list[dict[str, Any]]:
    """The input items for one canonical turn, in its order."""
    items: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []

    def flush() -> None:
        if pending:
            items.append({"type": "message", "role": message.role, "content": list(pending)})
            pending.clear()

    for part in message.parts:
        if isinstance(part, Text):
            kind = "output_text" if message.role == "assistant" else "input_text"
            pending.append({"type": kind, "text": part.text})
        elif isinstance(part, Image) and message.role == "user":
            pending.append(_image_part(part))
        elif isinstance(part, ToolCall):
            flush()
            name = short_tool_name(part.name)
            items.append(
                {
                    "type": "function_call",
                    "call_id": part.id,
                    "name": name,
                    "arguments": part.arguments,
                }
            )
        elif isinstance(part, ToolResult):
            flush()
            items.append(
                {"type": "function_call_output", "call_id": part.call_id, "output": _output(part)}
            )
        elif isinstance(part, Thinking) and part.origin == "openai" and part.signature:
            flush()
            summary = [{"type": "summary_text", "text": part.text}] if part.text else []
            items.append(
                {"type": "reasoning", "summary": summary, "encrypted_content": part.signature}
            )
    flush()
    return items


def _image_part(image: Image) -> dict[str, Any]:
    url = image.url or f"data:{image.media_type or 'image/png'};base64,{image.data or ''}"
    return {"type": "input_image", "image_url": url, "detail": "auto"}


def _output(result: ToolResult) -> str | list[dict[str, Any]]:
    """A tool result's output: its text, or text and image parts when it has images."""
    # Responses has no error flag on a tool output; the model reads it from the text.
    prefix = "Error: " if result.is_error else ""
    if not any(isinstance(part, Image) for part in result.content):
        return prefix + "\n".join(part.text for part in result.content if isinstance(part, Text))
    parts = [
        {"type": "input_text", "text": part.text} if isinstance(part, Text) else _image_part(part)
        for part in result.content
    ]
    return [{"type": "input_text", "text": prefix}, *parts] if prefix else parts


def read_reply(body: dict[str, Any], request: Request) -> Reply:
    """A complete Responses `response` object as a canonical reply."""
    output = body.get("output")
    if not isinstance(output, list):
        raise ValueError("a Responses reply needs an `output` array")
    if body.get("status") == "failed":
        error = body.get("error") or {}
        reason = error.get("message") if isinstance(error, dict) else None
        raise ValueError(f"the upstream response failed: {reason or 'no reason given'}")
    parts: list[Text | ToolCall | Thinking] = []
    for item in output:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "message":
            for part in item.get("content") or ():
                text = (
                    part.get("text") if part.get("type") == "output_text" else part.get("refusal")
                )
                if isinstance(text, str) and text:
                    parts.append(Text(text))
        elif kind == "function_call":
            name = restore_tool_name(str(item.get("name") or ""), request)
            arguments = str(item.get("arguments") or "{}")
            parts.append(
                ToolCall(str(item.get("call_id") or item.get("id") or ""), name, arguments)
            )
        elif kind == "reasoning":
            thinking = read_thinking(item)
            if thinking.text or thinking.signature:
                parts.append(thinking)
    tool_called = any(isinstance(part, ToolCall) for part in parts)
    created = body.get("created_at")
    return Reply(
        id=str(body.get("id") or ""),
        model=str(body.get("model") or request.model),
        parts=tuple(parts),
        stop=read_stop(body, tool_called=tool_called),
        usage=read_usage(body.get("usage")),
        created=int(created) if isinstance(created, int | float) else 0,
    )


def write_reply(reply: Reply, request: Request) -> dict[str, Any]:
    """A canonical reply as a Responses `response` object for the client."""
    response_id = responses_id(reply.id)
    base = response_id.removeprefix("resp_")
    output: list[dict[str, Any]] = []
    texts: list[str] = []
    for part in (*reply.parts, None):
        if isinstance(part, Text):
            texts.append(part.text)
            continue
        if texts:
            output.append(message_item(f"msg_{base}_{len(output)}", texts))
            texts = []
        if isinstance(part, ToolCall):
            arguments = part.arguments or "{}"
            output.append(function_call_item(f"fc_{part.id}", part.id, part.name, arguments))
        elif isinstance(part, Thinking):
            output.append(reasoning_output(f"rs_{base}_{len(output)}", part))
    reason = incomplete_reason(reply.stop)
    return response_object(
        response_id,
        reply.model,
        reply.created,
        "incomplete" if reason else "completed",
        output,
        usage=write_usage(reply.usage),
        incomplete_reason=reason,
        echo=request_echo(request),
    )


class OpenAIResponsesCodec:
    """The OpenAI Responses side of translation."""

    api = Api.OPENAI_RESPONSES

    def read_request(self, body: dict[str, Any]) -> Request:
        """A client's Responses request as a canonical request."""
        return read_request(body)

    def write_request(self, request: Request, *, model: str) -> dict[str, Any]:
        """The Responses body for an upstream."""
        return write_request(request, model=model)

    def read_reply(self, body: dict[str, Any], request: Request) -> Reply:
        """An upstream's Responses reply."""
        return read_reply(body, request)

    def write_reply(self, reply: Reply, request: Request) -> dict[str, Any]:
        """The client's Responses reply."""
        return write_reply(reply, request)

    def stream_reader(self, request: Request) -> StreamReader:
        """A reader for one Responses upstream stream."""
        return ResponsesStreamReader(request)

    def stream_writer(self, request: Request) -> StreamWriter:
        """A writer for one Responses client stream."""
        return ResponsesStreamWriter(request)


OPENAI_RESPONSES = OpenAIResponsesCodec()
"""The Responses codec."""
