"""OpenAI Chat Completions requests and replies, read into and written from the canonical form.

`OPENAI_CHAT` is this API's codec. Its request writer serves clients of other APIs that
fall to an OpenAI-compatible upstream, so it writes what such upstreams widely accept:
one leading system message, tool results as `tool` messages before the user's own text,
tool names of at most 64 characters, and no reasoning in the history (only some upstreams
accept `reasoning_content` back). What it writes for the model it targets follows that
model's capabilities (`rungway.models`): a reasoning model gets `max_completion_tokens`
(OpenAI's reasoning models reject `max_tokens`) and a reasoning effort; a model known not
to reason gets `max_tokens` and no effort; an unknown model gets `max_tokens` and the effort
the client asked for.

Structured output is `response_format`: `json_schema` with the schema, its name (`output`
when the client gave none) and `strict`, or `json_object` when no schema was asked for.

Decisions where Chat has no field:
- Images in a tool result move to the user message that follows the `tool` messages (a
  `tool` message carries text only); the tool message says so.
- `is_error` becomes an `Error: ` prefix on the tool message.
- Thinking in a reply or stream becomes `reasoning_content`, the non-standard field
  reasoning-aware Chat clients read; signatures and redacted thinking are left out.
- A reply without a timestamp keeps `created: 0`: codecs read no clock, so the caller
  stamps `Reply.created` (or `Started.created`) when it wants a real one.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson

from rungway.models.capabilities import model_capabilities
from rungway.protocol import json_values
from rungway.protocol.api import Api
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
from rungway.translate.names import restore_tool_name, short_tool_name
from rungway.translate.openai_chat_stream import (
    ChatStreamReader,
    ChatStreamWriter,
    completion_id,
    finish_reason,
    read_stop,
    read_usage,
    write_usage,
)

DROPPED_FIELDS = frozenset(
    {
        "cache_control",  # Chat has no prompt-cache markers
        "thinking",  # reasoning is not sent back upstream in the history
        "thinking.signature",  # signatures belong to their provider; replies carry text only
        "redacted_thinking",  # opaque data with no text to show
        "image.assistant",  # an assistant turn in Chat holds no images
        "stop_sequence",  # finish_reason `stop` does not say which sequence matched
        "stop.beyond_four",  # Chat takes at most four stop sequences
        "reasoning.budget_tokens",  # only its effort level (low, medium, high) goes out
        "cache_write_tokens",  # counted in prompt_tokens; Chat has no field of its own
    }
)
"""Canonical fields the Chat writers leave out on purpose (request fields the reader
cannot carry are named per request in `Request.dropped`)."""

MAX_STOP_SEQUENCES = 4
EFFORT_LIMITS = ((2048, "low"), (8192, "medium"))
"""A thinking budget up to each limit asks for that effort; a larger one asks for `high`."""
MOVED_IMAGE_NOTE = "[image in the next user message]"
OUTPUT_NAME = "output"
"""The `json_schema` name written when the client's structured output had none."""

_READ_FIELDS = frozenset(
    {"model", "messages", "tools", "tool_choice", "parallel_tool_calls", "max_tokens"}
    | {"max_completion_tokens", "temperature", "top_p", "stop", "stream", "stream_options"}
    | {"reasoning_effort", "user", "response_format"}
)
"""Every other field set to something but its neutral value is named in `Request.dropped`."""
_NEUTRAL = {"n": 1, "logprobs": False, "presence_penalty": 0, "frequency_penalty": 0}
_EFFORTS: dict[str, Literal["minimal", "low", "medium", "high"]] = {
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",
    "max": "high",
}


class OpenAIChatCodec:
    """The OpenAI Chat Completions API's side of translation."""

    api = Api.OPENAI_CHAT

    def read_request(self, body: dict[str, Any]) -> Request:
        """A Chat request as a canonical request; raises ValueError on what it cannot read."""
        dropped = [
            key
            for key, value in body.items()
            if key not in _READ_FIELDS and value is not None and _NEUTRAL.get(key) != value
        ]
        system: list[Text] = []
        messages = _read_messages(body["messages"], system, dropped)
        options = body.get("stream_options")
        effort = body.get("reasoning_effort")
        effort = _EFFORTS.get(effort) if isinstance(effort, str) else None
        if effort is None and body.get("reasoning_effort") not in (None, "none"):
            dropped.append("reasoning_effort")
        max_tokens = body.get("max_completion_tokens")
        if json_values.whole(max_tokens) is None:
            max_tokens = body.get("max_tokens")
        user = body.get("user")
        return Request(
            model=body["model"],
            messages=messages,
            system=tuple(system),
            tools=_read_tools(body.get("tools"), dropped),
            tool_choice=_read_tool_choice(body.get("tool_choice"), dropped),
            parallel_tool_calls=json_values.flag(body.get("parallel_tool_calls")),
            max_tokens=json_values.whole(max_tokens),
            temperature=json_values.number(body.get("temperature")),
            temperature_max=2.0,
            top_p=json_values.number(body.get("top_p")),
            stop=_read_stop_sequences(body.get("stop")),
            stream=body.get("stream") is True,
            include_usage=isinstance(options, dict) and options.get("include_usage") is True,
            reasoning=Reasoning(effort=effort) if effort is not None else None,
            output_format=read_response_format(body.get("response_format"), dropped),
            user=user if isinstance(user, str) else None,
            dropped=tuple(dict.fromkeys(dropped)),
        )

    def write_request(self, request: Request, *, model: str) -> dict[str, Any]:
        """The Chat body for an OpenAI-compatible upstream."""
        body: dict[str, Any] = {"model": model, "messages": _write_messages(request)}
        # Chat rejects tool_choice and parallel_tool_calls without tools.
        if request.tools:
            body["tools"] = [_write_tool(tool) for tool in request.tools]
            if request.tool_choice is not None:
                body["tool_choice"] = _write_tool_choice(request.tool_choice)
            if request.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = request.parallel_tool_calls
        reasons = model_capabilities(model).reasoning
        if request.max_tokens is not None:
            # `max_tokens` is what every OpenAI-compatible provider reads, but OpenAI's
            # reasoning models reject it for `max_completion_tokens`.
            body["max_completion_tokens" if reasons else "max_tokens"] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.stop:
            body["stop"] = list(request.stop[:MAX_STOP_SEQUENCES])
        if request.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}  # the gateway counts tokens
        effort = _write_effort(request.reasoning)
        if effort is not None and reasons is not False:
            body["reasoning_effort"] = effort
        if request.output_format is not None:
            body["response_format"] = write_response_format(request.output_format)
        if request.user is not None:
            body["user"] = request.user
        return body

    def read_reply(self, body: dict[str, Any], request: Request) -> Reply:
        """A chat.completion from an upstream as a canonical reply."""
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ValueError("the chat completion has no `choices`")
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise ValueError("the chat completion's first choice has no `message`")
        parts: list[Text | ToolCall | Thinking] = []
        reasoning = message.get("reasoning_content")
        if not isinstance(reasoning, str):
            reasoning = message.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            parts.append(Thinking(reasoning, origin="openai"))
        texts = _read_content(message.get("content"), "message", [])
        if not texts and isinstance(message.get("refusal"), str):
            texts = [Text(message["refusal"])]
        parts += [text for text in texts if isinstance(text, Text)]
        calls = _read_tool_calls(message.get("tool_calls"), "message", [], reply=True)
        parts += [ToolCall(c.id, restore_tool_name(c.name, request), c.arguments) for c in calls]
        usage = body.get("usage")
        created = body.get("created")
        return Reply(
            id=str(body.get("id") or ""),
            model=str(body.get("model") or request.model),
            parts=tuple(parts),
            stop=read_stop(choice.get("finish_reason"), called=bool(calls)),
            usage=read_usage(usage) if isinstance(usage, dict) else read_usage({}),
            created=created if isinstance(created, int) else 0,
        )

    def write_reply(self, reply: Reply, request: Request) -> dict[str, Any]:
        """A chat.completion for a Chat client."""
        texts = [part.text for part in reply.parts if isinstance(part, Text)]
        thinking = [part.text for part in reply.parts if isinstance(part, Thinking) and part.text]
        calls = [part for part in reply.parts if isinstance(part, ToolCall)]
        content = "".join(texts) if texts or not calls else None
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
        if thinking:
            message["reasoning_content"] = "".join(thinking)
        if calls:
            message["tool_calls"] = [_write_tool_call(call, short=False) for call in calls]
        choice = {"index": 0, "message": message, "logprobs": None}
        return {
            "id": completion_id(reply.id),
            "object": "chat.completion",
            "created": reply.created,
            "model": reply.model or request.model,
            "choices": [{**choice, "finish_reason": finish_reason(reply.stop)}],
            "usage": write_usage(reply.usage),
        }

    def stream_reader(self, request: Request) -> ChatStreamReader:
        """A reader for one Chat upstream stream."""
        return ChatStreamReader(request)

    def stream_writer(self, request: Request) -> ChatStreamWriter:
        """A writer for one Chat client stream."""
        return ChatStreamWriter(request)


OPENAI_CHAT = OpenAIChatCodec()


def read_response_format(value: Any, dropped: list[str]) -> OutputFormat | None:
    """Chat's `response_format` (`text`, `json_object` or `json_schema`) as an output format."""
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "json_object":
        return OutputFormat()
    if kind == "json_schema":
        spec = value.get("json_schema")
        if not isinstance(spec, dict):
            raise ValueError("response_format.json_schema must be an object with a `name`")
        return read_json_schema(spec)
    if kind not in (None, "text"):
        dropped.append(f"response_format.{kind}")
    return None


def write_response_format(output: OutputFormat) -> dict[str, Any]:
    """Chat's `response_format` for an output format."""
    if output.schema is None:
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": json_schema_fields(output)}


def read_json_schema(spec: dict[str, Any]) -> OutputFormat:
    """OpenAI's `json_schema` fields (`schema`, `name`, `strict`) as an output format: Chat
    nests them in `response_format.json_schema`, Responses puts them in `text.format`."""
    schema = spec.get("schema")
    return OutputFormat(
        schema=schema if isinstance(schema, dict) else None,
        name=json_values.text(spec.get("name")),
        strict=json_values.flag(spec.get("strict")),
    )


def json_schema_fields(output: OutputFormat) -> dict[str, Any]:
    """OpenAI's `json_schema` fields for an output format with a schema."""
    spec: dict[str, Any] = {"name": output.name or OUTPUT_NAME, "schema": output.schema}
    if output.strict is not None:
        spec["strict"] = output.strict
    return spec


def _read_messages(raw: list[Any], system: list[Text], dropped: list[str]) -> tuple[Message, ...]:
    turns: list[tuple[Literal["user", "assistant"], list[Part]]] = []
    in_tool_turn = False  # tool messages (and the user message after them) share one turn
    for number, message in enumerate(raw):
        where = f"messages[{number}]"
        role = message.get("role")
        if "name" in message:
            dropped.append("messages.name")
        if role in ("system", "developer"):
            content = _read_content(message.get("content"), where, dropped)
            system += [part for part in content if isinstance(part, Text)]
        elif role == "tool":
            result = _read_tool_result(message, where, dropped)
            if in_tool_turn:
                turns[-1][1].append(result)
            else:
                turns.append(("user", [result]))
            in_tool_turn = True
        elif role == "user":
            parts = _read_content(message.get("content"), where, dropped, images=True)
            if in_tool_turn:
                turns[-1][1].extend(parts)
            else:
                turns.append(("user", list(parts)))
            in_tool_turn = False
        elif role == "assistant":
            turns.append(("assistant", _read_assistant(message, where, dropped)))
            in_tool_turn = False
        elif role == "function":
            dropped.append("messages.function")  # legacy results without a call id
        else:
            raise ValueError(
                f"{where}.role must be system, developer, user, assistant or tool, not {role!r}"
            )
    return tuple(Message(role, tuple(parts)) for role, parts in turns)


def _read_content(
    content: Any, where: str, dropped: list[str], *, images: bool = False
) -> list[Text | Image]:
    """Text (and, where allowed, images) of a message's string or array content."""
    if content is None:
        return []
    if isinstance(content, str):
        return [Text(content)] if content else []
    if not isinstance(content, list):
        raise ValueError(f"{where}.content must be a string or an array of content parts")
    parts: list[Text | Image] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        text = part.get(kind) if kind in ("text", "refusal") else None
        if isinstance(text, str):
            if text:
                parts.append(Text(text))
        elif kind == "image_url" and images:
            parts.append(_read_image(part, where, dropped))
        else:
            dropped.append(f"content.{kind}")
    return parts


def _read_image(part: dict[str, Any], where: str, dropped: list[str]) -> Image:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str) or not url:
        raise ValueError(f"{where}: an image_url part needs a `url`")
    if isinstance(image, dict) and image.get("detail") not in (None, "auto"):
        dropped.append("image_url.detail")
    if url.startswith("data:"):
        header, comma, data = url[5:].partition(",")
        if comma and header.endswith(";base64"):
            return Image(media_type=header[:-7] or None, data=data)
    return Image(url=url)


def _read_assistant(message: dict[str, Any], where: str, dropped: list[str]) -> list[Part]:
    parts: list[Part] = []
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        parts.append(Thinking(reasoning, origin="openai"))
    parts += _read_content(message.get("content"), where, dropped)
    parts += _read_tool_calls(message.get("tool_calls"), where, dropped)
    for field in ("audio", "function_call"):
        if message.get(field) is not None:
            dropped.append(f"assistant.{field}")
    return parts


def _read_tool_calls(
    calls: Any, where: str, dropped: list[str], *, reply: bool = False
) -> list[ToolCall]:
    if not isinstance(calls, list):
        return []
    read: list[ToolCall] = []
    for number, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            dropped.append(f"tool_calls.{call.get('type') if isinstance(call, dict) else None}")
            continue
        call_id, name = call.get("id"), function.get("name")
        if reply and not call_id:
            call_id = f"call_{number}"  # an upstream that numbers nothing still gets answered
        if not isinstance(call_id, str) or not isinstance(name, str) or not name:
            raise ValueError(f"{where}.tool_calls[{number}] needs an `id` and `function.name`")
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            # Some clients send the arguments as an object rather than its JSON text.
            arguments = orjson.dumps(arguments).decode() if arguments is not None else ""
        read.append(ToolCall(call_id, name, arguments or "{}"))
    return read


def _read_tool_result(message: dict[str, Any], where: str, dropped: list[str]) -> ToolResult:
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise ValueError(f"{where}: a tool message needs a `tool_call_id`")
    return ToolResult(call_id, tuple(_read_content(message.get("content"), where, dropped)))


def _read_tools(tools: Any, dropped: list[str]) -> tuple[Tool, ...]:
    read: list[Tool] = []
    for number, tool in enumerate(tools if isinstance(tools, list) else ()):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict):
            dropped.append(f"tools.{tool.get('type') if isinstance(tool, dict) else None}")
            continue
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"tools[{number}].function.name is required")
        if function.get("strict"):
            dropped.append("tools.strict")
        description = function.get("description")
        parameters = function.get("parameters")
        read.append(
            Tool(
                name=name,
                description=description if isinstance(description, str) else None,
                parameters=parameters if isinstance(parameters, dict) else _empty_schema(),
            )
        )
    return tuple(read)


def _empty_schema() -> dict[str, Any]:
    """The schema of a function declared without parameters: it takes none."""
    return {"type": "object", "properties": {}}


def _read_tool_choice(choice: Any, dropped: list[str]) -> ToolChoice | None:
    if isinstance(choice, str) and choice in TOOL_MODES:
        return TOOL_MODES[choice]
    if not isinstance(choice, dict):
        return None
    function = choice.get("function")
    if choice.get("type") == "function" and isinstance(function, dict):
        name = function.get("name")
        return ToolNamed(name) if isinstance(name, str) and name else None
    dropped.append(f"tool_choice.{choice.get('type')}")
    # An allowed-tools choice keeps its mode; the list of allowed tools has no place.
    allowed = choice.get("allowed_tools")
    mode = allowed.get("mode") if isinstance(allowed, dict) else None
    return mode if mode in ("auto", "required") else None


def _read_stop_sequences(stop: Any) -> tuple[str, ...]:
    if isinstance(stop, str):
        return (stop,) if stop else ()
    if isinstance(stop, list):
        return tuple(item for item in stop if isinstance(item, str) and item)
    return ()


def _write_messages(request: Request) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if request.system:
        text = "\n\n".join(part.text for part in request.system)
        messages.append({"role": "system", "content": text})
    for message in request.messages:
        if message.role == "user":
            messages += _write_user(message.parts)
        else:
            assistant = _write_assistant(message.parts)
            if assistant is not None:
                messages.append(assistant)
    return messages


def _write_user(parts: tuple[Part, ...]) -> list[dict[str, Any]]:
    """Tool messages for the turn's results, then one user message with its text and images."""
    written: list[dict[str, Any]] = []
    moved: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, ToolResult):
            images = [_write_image(item) for item in part.content if isinstance(item, Image)]
            moved += images
            texts = [item.text for item in part.content if isinstance(item, Text)]
            text = "\n\n".join([*texts, MOVED_IMAGE_NOTE] if images else texts)
            text = f"Error: {text}" if part.is_error else text
            written.append({"role": "tool", "tool_call_id": part.call_id, "content": text})
        elif isinstance(part, Text):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, Image):
            content.append(_write_image(part))
    content = [*moved, *content]
    if len(content) == 1 and content[0]["type"] == "text":
        written.append({"role": "user", "content": content[0]["text"]})
    elif content:
        written.append({"role": "user", "content": content})
    return written


def _write_image(image: Image) -> dict[str, Any]:
    url = image.url or f"data:{image.media_type or 'image/png'};base64,{image.data or ''}"
    return {"type": "image_url", "image_url": {"url": url}}


def _write_assistant(parts: tuple[Part, ...]) -> dict[str, Any] | None:
    texts = [part.text for part in parts if isinstance(part, Text)]
    calls = [_write_tool_call(part) for part in parts if isinstance(part, ToolCall)]
    if not texts and not calls:
        return None  # a turn of thinking alone says nothing Chat can carry
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return message


def _write_tool_call(call: ToolCall, *, short: bool = True) -> dict[str, Any]:
    name = short_tool_name(call.name) if short else call.name
    function = {"name": name, "arguments": call.arguments or "{}"}
    return {"id": call.id, "type": "function", "function": function}


def _write_tool(tool: Tool) -> dict[str, Any]:
    function: dict[str, Any] = {"name": short_tool_name(tool.name)}
    if tool.description is not None:
        function["description"] = tool.description
    function["parameters"] = tool.parameters
    return {"type": "function", "function": function}


def _write_tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    if isinstance(choice, ToolNamed):
        return {"type": "function", "function": {"name": short_tool_name(choice.name)}}
    return choice


def _write_effort(reasoning: Reasoning | None) -> str | None:
    if reasoning is None:
        return None
    if reasoning.effort is not None:
        return reasoning.effort
    if reasoning.budget_tokens is None:
        return None
    for limit, effort in EFFORT_LIMITS:
        if reasoning.budget_tokens <= limit:
            return effort
    return "high"
