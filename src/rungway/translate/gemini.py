"""Gemini API requests, read into and written from the canonical form.

`GEMINI` is this API's codec; its replies and streams are in `gemini_stream`. The body is
rungway's form of a GenerateContentRequest: the wire fields plus `model` and `stream`
(see `protocol.gemini`).

Gemini's function calls often carry no id (`functionCall.id` is optional): a call is then
answered by a `functionResponse` of the same name, in order. The reader gives each call of
a client's conversation without an id the id `call_<content index>_<part index>` (the same
every time the conversation is sent again) and pairs each response without an id with the
oldest unanswered call of its name. The writer sends the canonical ids in both `id` fields,
names each response after the call it answers, and puts a turn's responses in the order of
its calls.
"""

from __future__ import annotations

import base64
import itertools
import mimetypes
from collections import deque
from typing import Any, Literal
from urllib.parse import unquote_to_bytes

import orjson

from rungway.protocol.api import Api
from rungway.protocol.gemini import bare_model, field
from rungway.translate.canonical import (
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
from rungway.translate.gemini_stream import (
    SKIP_SIGNATURE,
    GeminiStreamReader,
    GeminiStreamWriter,
    function_call_part,
    read_reply,
    write_reply,
)
from rungway.translate.names import short_tool_name

EFFORT_BUDGETS = {"minimal": 512, "low": 2048, "medium": 8192, "high": 24576}
"""The thinking budget written for each reasoning effort."""

DROPPED_FIELDS = frozenset(
    {
        "parallel_tool_calls",  # Gemini has no switch for parallel calls
        "thinking.foreign",  # another family's thinking cannot be sent to Gemini
        "output_format.name",  # Gemini's response schema has no name
        "output_format.strict",  # nor a strict flag: its schema is always enforced
        "user",  # Gemini requests name no end user
        "include_usage",  # Gemini streams always report usage
        "text.cache",  # Anthropic's cache_control has no Gemini counterpart
        "stop_sequence",  # Gemini does not say which stop sequence ended the reply
        "thinking.signature.stream",  # stream events carry no origin for a signature
        "created",  # Gemini replies carry no timestamp
        "stop.beyond_five",  # Gemini takes at most five stop sequences
        "cache_write_tokens",  # Gemini counts cache writes as prompt tokens
    }
)
"""Canonical fields the Gemini writers leave out on purpose (request fields the reader
cannot carry are named per request in `Request.dropped`)."""

_READ_FIELDS = frozenset(
    {"model", "stream", "contents", "systemInstruction", "system_instruction", "tools"}
    | {"toolConfig", "tool_config", "generationConfig", "generation_config"}
)
_READ_GENERATION = frozenset(
    {"maxOutputTokens", "temperature", "topP", "stopSequences", "candidateCount"}
    | {"responseMimeType", "responseSchema", "responseJsonSchema", "thinkingConfig"}
)
_LEVELS: dict[Any, Literal["minimal", "low", "medium", "high"]] = {
    "MINIMAL": "minimal",
    "LOW": "low",
    "MEDIUM": "medium",
    "HIGH": "high",
    "XHIGH": "high",
}
_JSON = "application/json"


class GeminiCodec:
    """The Gemini API's side of translation."""

    api: Api = Api.GEMINI

    def read_request(self, body: dict[str, Any]) -> Request:
        """A client's GenerateContentRequest (rungway's form) as a canonical request."""
        if not isinstance(body.get("model"), str):
            raise ValueError("model is required (a string)")
        dropped = [key for key in body if key not in _READ_FIELDS]
        system = _read_system(field(body, "systemInstruction"))
        messages = _read_contents(body.get("contents") or [], dropped)
        tools = _read_tools(body.get("tools") or [], dropped)
        tools, choice = _read_tool_config(field(body, "toolConfig"), tools, dropped)
        config = field(body, "generationConfig") or {}
        dropped += [
            f"generationConfig.{key}" for key in config if _camel(key) not in _READ_GENERATION
        ]
        if (field(config, "candidateCount") or 1) > 1:
            dropped.append("generationConfig.candidateCount")
        return Request(
            model=bare_model(body["model"]),
            messages=messages,
            system=system,
            tools=tools,
            tool_choice=choice,
            max_tokens=field(config, "maxOutputTokens"),
            temperature=field(config, "temperature"),
            temperature_max=2.0,
            top_p=field(config, "topP"),
            stop=tuple(field(config, "stopSequences") or ()),
            stream=body.get("stream") is True,
            reasoning=_read_thinking(field(config, "thinkingConfig")),
            output_format=_read_output_format(config, dropped),
            dropped=tuple(dict.fromkeys(dropped)),
        )

    def write_request(self, request: Request, *, model: str) -> dict[str, Any]:
        """The GenerateContentRequest (rungway's form) for `request`, asking for `model`."""
        body: dict[str, Any] = {"model": bare_model(model), "stream": request.stream}
        body["contents"] = _write_contents(request.messages)
        system = [{"text": text.text} for text in request.system if text.text]
        if system:
            body["systemInstruction"] = {"parts": system}
        if request.tools:
            body["tools"] = [{"functionDeclarations": [_write_tool(t) for t in request.tools]}]
            config = _write_tool_choice(request.tool_choice)
            if config is not None:
                body["toolConfig"] = {"functionCallingConfig": config}
        generation = _write_generation(request)
        if generation:
            body["generationConfig"] = generation
        return body

    def read_reply(self, body: dict[str, Any], request: Request) -> Reply:
        """A Gemini upstream's GenerateContentResponse as a canonical reply."""
        return read_reply(body, request)

    def write_reply(self, reply: Reply, request: Request) -> dict[str, Any]:
        """The GenerateContentResponse a Gemini client gets for `reply`."""
        return write_reply(reply, request.model)

    def stream_reader(self, request: Request) -> GeminiStreamReader:
        """A reader for one Gemini upstream stream."""
        return GeminiStreamReader(request)

    def stream_writer(self, request: Request) -> GeminiStreamWriter:
        """A writer for one Gemini client stream."""
        return GeminiStreamWriter(request)


GEMINI = GeminiCodec()
"""The Gemini API codec."""


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


def _read_system(system: Any) -> tuple[Text, ...]:
    if not isinstance(system, dict):
        return ()
    parts = system.get("parts") or []
    return tuple(Text(part["text"]) for part in parts if isinstance(part.get("text"), str))


def _read_contents(contents: list[Any], dropped: list[str]) -> tuple[Message, ...]:
    messages: list[Message] = []
    unanswered: dict[str, deque[str]] = {}
    for number, content in enumerate(contents):
        if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
            raise ValueError(f"contents[{number}] must be a Content object with `parts`")
        role: Literal["user", "assistant"] = (
            "assistant" if content.get("role") == "model" else "user"
        )
        parts: list[Part] = []
        for index, part in enumerate(content["parts"]):
            if not isinstance(part, dict):
                raise ValueError(f"contents[{number}].parts[{index}] must be a Part object")
            parts += _read_part(part, f"call_{number}_{index}", unanswered, dropped)
        if not parts:
            continue
        if messages and messages[-1].role == role:
            messages[-1] = Message(role, messages[-1].parts + tuple(parts))
        else:
            messages.append(Message(role, tuple(parts)))
    return tuple(messages)


def _read_part(
    part: dict[str, Any], call_id: str, unanswered: dict[str, deque[str]], dropped: list[str]
) -> list[Part]:
    """A part as canonical parts: a signature on a part that is not a thought becomes a
    signed, empty Thinking before it, so a Gemini writer can put it back in place."""
    signature = field(part, "thoughtSignature")
    if signature == SKIP_SIGNATURE:
        signature = None
    lead: list[Part] = []
    if signature and not part.get("thought"):
        lead = [Thinking("", signature=signature, origin="gemini")]
    text = part.get("text")
    if isinstance(text, str):
        if part.get("thought"):
            return [Thinking(text, signature=signature or None, origin="gemini")]
        return [*lead, Text(text)] if text else lead
    call = field(part, "functionCall")
    if isinstance(call, dict):
        call_id = call.get("id") or call_id
        unanswered.setdefault(call["name"], deque()).append(call_id)
        arguments = orjson.dumps(call.get("args") or {}).decode()
        return [*lead, ToolCall(call_id, call["name"], arguments)]
    response = field(part, "functionResponse")
    if isinstance(response, dict):
        waiting = unanswered.get(response["name"])
        answered = response.get("id") or (waiting.popleft() if waiting else call_id)
        return [*lead, _read_result(answered, response.get("response") or {})]
    image = _read_image(part, dropped)
    if image is not None:
        return [*lead, image]
    return lead


def _read_result(call_id: str, response: dict[str, Any]) -> ToolResult:
    """A function's response: Google's `output` or `error` text as it is, else its JSON."""
    if response.keys() == {"output"} and isinstance(response["output"], str):
        return ToolResult(call_id, (Text(response["output"]),))
    if response.keys() == {"error"} and isinstance(response["error"], str):
        return ToolResult(call_id, (Text(response["error"]),), is_error=True)
    return ToolResult(call_id, (Text(orjson.dumps(response).decode()),))


def _read_image(part: dict[str, Any], dropped: list[str]) -> Image | None:
    inline = field(part, "inlineData")
    if isinstance(inline, dict):
        media_type = field(inline, "mimeType")
        if media_type.startswith("image/"):
            return Image(media_type=media_type, data=inline["data"])
        dropped.append(f"contents.inlineData.{media_type}")  # audio, video, PDF
        return None
    file = field(part, "fileData")
    if isinstance(file, dict):
        media_type = field(file, "mimeType")
        if media_type is None or media_type.startswith("image/"):
            # By URL, as the canonical form keeps images from the web; the type is guessed
            # again from the URL when written.
            return Image(url=field(file, "fileUri"))
        dropped.append(f"contents.fileData.{media_type}")
        return None
    kinds = [key for key in part if key not in ("thought", "thoughtSignature", "thought_signature")]
    dropped += [f"contents.{kind}" for kind in kinds]  # executable code, video metadata, ...
    return None


def _read_tools(tools: list[Any], dropped: list[str]) -> tuple[Tool, ...]:
    read: list[Tool] = []
    for tool in tools:
        declarations = field(tool, "functionDeclarations")
        dropped += [f"tools.{key}" for key in tool if _camel(key) != "functionDeclarations"]
        for declaration in declarations or ():
            schema = field(declaration, "parametersJsonSchema")
            if schema is None:
                schema = json_schema(declaration.get("parameters"))
            if not isinstance(schema, dict):
                schema = {"type": "object", "properties": {}}
            read.append(Tool(declaration["name"], declaration.get("description"), schema))
    return tuple(read)


def json_schema(schema: Any) -> Any:
    """Gemini's OpenAPI-style `Schema` as JSON Schema: types in lower case, and `nullable`
    as a `null` type."""
    if isinstance(schema, list):
        return [json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            converted[key] = value.lower()
        elif key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            converted[key] = {name: json_schema(item) for name, item in value.items()}
        elif key != "nullable":
            converted[key] = json_schema(value)
    if schema.get("nullable") is True and isinstance(converted.get("type"), str):
        converted["type"] = [converted["type"], "null"]
    return converted


def _read_tool_config(
    config: Any, tools: tuple[Tool, ...], dropped: list[str]
) -> tuple[tuple[Tool, ...], ToolChoice | None]:
    """The tool choice, and the tools narrowed to `allowedFunctionNames` when it names some."""
    calling = field(config, "functionCallingConfig") if isinstance(config, dict) else None
    if not isinstance(calling, dict):
        return tools, None
    mode = str(calling.get("mode") or "AUTO").upper()
    allowed = field(calling, "allowedFunctionNames") or []
    if mode == "NONE":
        return tools, "none"
    if mode in ("AUTO", "MODE_UNSPECIFIED"):
        return tools, "auto"
    if mode == "VALIDATED":
        dropped.append("toolConfig.functionCallingConfig.mode.VALIDATED")  # read as AUTO
        return tools, "auto"
    if len(allowed) == 1:
        return tools, ToolNamed(allowed[0])
    if allowed:  # ANY of several: the model may call only those
        return tuple(tool for tool in tools if tool.name in allowed), "required"
    return tools, "required"


def _read_thinking(config: Any) -> Reasoning | None:
    if not isinstance(config, dict):
        return None
    level = _LEVELS.get(str(field(config, "thinkingLevel") or "").upper())
    budget = field(config, "thinkingBudget")
    if budget == 0:
        return None if level is None else Reasoning(effort=level)  # thinking turned off
    if budget is None or budget < 0:  # -1: the model decides how much to think
        return None if level is None and budget is None else Reasoning(effort=level or "medium")
    return Reasoning(effort=level, budget_tokens=budget)


def _read_output_format(config: dict[str, Any], dropped: list[str]) -> OutputFormat | None:
    media_type = field(config, "responseMimeType")
    schema = field(config, "responseJsonSchema")
    if schema is None and field(config, "responseSchema") is not None:
        schema = json_schema(field(config, "responseSchema"))
    if media_type == _JSON:
        return OutputFormat(schema=schema if isinstance(schema, dict) else None)
    if media_type not in (None, "text/plain"):
        dropped.append(f"generationConfig.responseMimeType.{media_type}")  # text/x.enum
    if schema is not None:
        dropped.append("generationConfig.responseSchema")  # a schema without JSON output
    return None


def _write_contents(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    names = {
        part.id: part.name
        for message in messages
        for part in message.parts
        if isinstance(part, ToolCall)
    }
    wire: list[dict[str, Any]] = []
    for message in messages:
        role = "model" if message.role == "assistant" else "user"
        parts = _write_parts(message.parts, names, model=role == "model")
        if not parts:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["parts"].extend(parts)
        else:
            wire.append({"role": role, "parts": parts})
    for previous, current in itertools.pairwise(wire):
        if previous["role"] == "model":
            current["parts"] = _responses_first(previous["parts"], current["parts"])
    return wire


def _write_parts(
    parts: tuple[Part, ...], names: dict[str, str], *, model: bool
) -> list[dict[str, Any]]:
    """Wire parts; a Gemini signature goes on the part it was read from, and the first
    call of a model turn without one gets Google's documented stand-in, which Gemini 3
    requires on calls it did not make itself."""
    wire: list[dict[str, Any]] = []
    signature: str | None = None
    signed_call = False
    for part in parts:
        if isinstance(part, Thinking):
            if part.origin == "gemini" and part.text:
                thought: dict[str, Any] = {"text": part.text, "thought": True}
                if part.signature:
                    thought["thoughtSignature"] = part.signature
                wire.append(thought)
            elif part.origin == "gemini" and part.signature:
                signature = part.signature
            continue
        written = _write_part(part, names)
        if written is None:
            continue
        if isinstance(part, ToolCall) and model and not signed_call:
            signature = signature or SKIP_SIGNATURE
            signed_call = True
        if signature is not None:
            written["thoughtSignature"] = signature
            signature = None
        wire.append(written)
    if signature is not None:  # a signature on the turn's last, empty text part
        wire.append({"text": "", "thoughtSignature": signature})
    return wire


def _write_part(part: Part, names: dict[str, str]) -> dict[str, Any] | None:
    if isinstance(part, Text):
        return {"text": part.text} if part.text else None
    if isinstance(part, Image):
        return _write_image(part)
    if isinstance(part, ToolCall):
        return function_call_part(short_tool_name(part.name), part.arguments, part.id)
    if isinstance(part, ToolResult):
        name = short_tool_name(names.get(part.call_id, part.call_id))
        response = {"id": part.call_id, "name": name, "response": _write_result(part)}
        return {"functionResponse": response}
    return None


def _write_result(result: ToolResult) -> dict[str, Any]:
    """A tool result as a `response` object: a JSON object as it is, other text under
    `output` (or `error`), as Google's function-calling guide advises."""
    text = "".join(part.text for part in result.content if isinstance(part, Text))
    if not result.is_error and text.startswith("{"):
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    return {"error" if result.is_error else "output": text}


def _responses_first(calls: list[dict[str, Any]], parts: list[dict[str, Any]]) -> list[Any]:
    """Function responses lead the turn after the calls, in the order of the calls."""
    order = [part["functionCall"]["name"] for part in calls if "functionCall" in part]
    responses = [part for part in parts if "functionResponse" in part]
    rest = [part for part in parts if "functionResponse" not in part]
    ranked: list[dict[str, Any]] = []
    for name in order:
        found = next((r for r in responses if r["functionResponse"]["name"] == name), None)
        if found is not None:
            responses.remove(found)
            ranked.append(found)
    return ranked + responses + rest


def _write_image(image: Image) -> dict[str, Any] | None:
    media_type, data = image.media_type, image.data
    if data is None and image.url and image.url.startswith("data:"):
        header, _, payload = image.url[len("data:") :].partition(",")
        media_type, *params = header.split(";")
        data = (
            payload if "base64" in params else base64.b64encode(unquote_to_bytes(payload)).decode()
        )
    if data is not None:
        return {"inlineData": {"mimeType": media_type or "image/png", "data": data}}
    if image.url:
        guessed = mimetypes.guess_type(image.url.split("?")[0])[0]
        return {
            "fileData": {"mimeType": media_type or guessed or "image/jpeg", "fileUri": image.url}
        }
    return None


def _write_tool(tool: Tool) -> dict[str, Any]:
    schema = tool.parameters or {"type": "object", "properties": {}}
    written: dict[str, Any] = {"name": short_tool_name(tool.name)}
    if tool.description:
        written["description"] = tool.description
    written["parametersJsonSchema"] = schema
    return written


def _write_tool_choice(choice: ToolChoice | None) -> dict[str, Any] | None:
    if isinstance(choice, ToolNamed):
        return {"mode": "ANY", "allowedFunctionNames": [short_tool_name(choice.name)]}
    modes = {"auto": "AUTO", "none": "NONE", "required": "ANY"}
    return None if choice is None else {"mode": modes[choice]}


def _write_generation(request: Request) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if request.max_tokens is not None:
        config["maxOutputTokens"] = request.max_tokens
    if request.temperature is not None:
        config["temperature"] = max(0.0, min(request.temperature, 2.0))
    if request.top_p is not None:
        config["topP"] = request.top_p
    if request.stop:
        config["stopSequences"] = list(request.stop[:5])  # Gemini takes at most five
    if request.output_format is not None:
        config["responseMimeType"] = _JSON
        if request.output_format.schema is not None:
            config["responseJsonSchema"] = request.output_format.schema
    reasoning = request.reasoning
    if reasoning is not None:
        budget = reasoning.budget_tokens
        if budget is None and reasoning.effort is not None:
            budget = EFFORT_BUDGETS[reasoning.effort]
        thinking: dict[str, Any] = {"includeThoughts": True}
        if budget is not None:
            thinking["thinkingBudget"] = budget
        config["thinkingConfig"] = thinking
    return config
