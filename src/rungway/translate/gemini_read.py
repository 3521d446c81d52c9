"""Gemini API requests read into the canonical form (the reader half of the `GEMINI` codec).

Gemini's function calls often carry no id (`functionCall.id` is optional): a call is then
answered by a `functionResponse` of the same name, in order. The reader gives each call of
a client's conversation without an id the id `call_<content index>_<part index>` (the same
every time the conversation is sent again) and pairs each response without an id with the
oldest unanswered call of its name.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any, Literal

import orjson

from rungway.protocol.gemini import bare_model, field
from rungway.translate.canonical import (
    Image,
    Message,
    OutputFormat,
    Part,
    Reasoning,
    Request,
    Text,
    Thinking,
    Tool,
    ToolCall,
    ToolChoice,
    ToolNamed,
    ToolResult,
)
from rungway.translate.gemini_stream import SKIP_SIGNATURE

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


def read_request(body: dict[str, Any]) -> Request:
    """A client's GenerateContentRequest (rungway's form) as a canonical request."""
    if not isinstance(body.get("model"), str):
        raise ValueError("model is required (a string)")
    dropped = [key for key in body if key not in _READ_FIELDS]
    system = _read_system(field(body, "systemInstruction"))
    messages = _read_contents(body.get("contents") or [], dropped)
    tools = _read_tools(body.get("tools") or [], dropped)
    tools, choice = _read_tool_config(field(body, "toolConfig"), tools, dropped)
    config = field(body, "generationConfig") or {}
    dropped += [f"generationConfig.{key}" for key in config if _camel(key) not in _READ_GENERATION]
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
        result = _read_result(answered, response.get("response") or {})
        # A multimodal response's own images (`functionResponse.parts`, as Gemini 3 takes).
        images = (_read_image(item, dropped) for item in response.get("parts") or ())
        content = result.content + tuple(image for image in images if image is not None)
        return [*lead, dataclasses.replace(result, content=content)]
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
            return Image(media_type=media_type, url=field(file, "fileUri"))
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
