"""OpenAI Responses: request checks, error bodies and stream events.

A Responses stream is a sequence of `event: <type>` frames whose data repeats the type and
carries a `sequence_number`; it has no `[DONE]` and ends with `response.completed`,
`response.incomplete` or `response.failed`.
"""

from __future__ import annotations

from typing import Any

import orjson

from rungway.protocol import openai_chat
from rungway.protocol import request_checks as checks
from rungway.protocol.failures import FailureClass

UNSEQUENCED = 2**31 - 1
"""The `sequence_number` of a failure event written without the stream's counter.

Such an event may follow any number of events the gateway relayed, so it takes a number
above any real stream's: clients that check order see it last, and those that resume
`starting_after` a number still receive it.
"""

UNKNOWN_RESPONSE_ID = "resp_gateway_error"
"""The response id of a failure event written without knowing the stream's response."""

_RATE_LIMITED = "rate_limit_exceeded"
_SERVER_ERROR = "server_error"
_INVALID_PROMPT = "invalid_prompt"

# `response.error.code` is a closed set in the published schema: a gateway failure maps to
# the nearest member, and the failure class itself goes in the free-form `type`.
_ERROR_CODES = {
    FailureClass.RATE_LIMITED: _RATE_LIMITED,
    FailureClass.QUOTA_EXHAUSTED: _RATE_LIMITED,
    FailureClass.BAD_REQUEST: _INVALID_PROMPT,
}


def check_request(body: dict[str, Any]) -> str | None:
    """Return what is wrong with a Responses request's shape, or None when it can be routed.

    Every field the gateway reads, rewrites or translates is checked, once, so nothing
    malformed reaches routing, a budget or an upstream.
    """
    problem = checks.model_name(body.get("model"))
    if problem is not None:
        return f"`model` {problem}"
    items = body.get("input")
    if not isinstance(items, str | list):
        return "`input` is required and must be a string or an array of input items"
    if isinstance(items, list):
        for number, item in enumerate(items):
            problem = _input_item(item, f"input[{number}]")
            if problem is not None:
                return problem
    found = checks.first_problem(body, _FIELDS)
    if found is not None:
        return f"`{found[0]}` {found[1]}"
    return _tools(body.get("tools")) or _tool_choice(body.get("tool_choice"))


_FIELDS: dict[str, checks.Check] = {
    "instructions": checks.string,
    "max_output_tokens": checks.output_limit,
    "stream": checks.boolean,
    "temperature": checks.number,
    "top_p": checks.number,
    "tools": checks.objects,
    "parallel_tool_calls": checks.boolean,
    "reasoning": lambda value: checks.mapping(value) or _reasoning(value),
    "user": checks.string,
}
"""Optional fields and their checks; tools and tool_choice are checked below."""
# A tuple, not a set: a value of any JSON type is compared, and arrays cannot be hashed.
_ROLES = ("user", "assistant", "system", "developer")
_TEXT_PARTS = {"input_text": "text", "output_text": "text", "text": "text", "refusal": "refusal"}


def _reasoning(reasoning: dict[str, Any]) -> str | None:
    for name in ("effort", "summary"):
        value = reasoning.get(name)
        if value is not None and not isinstance(value, str):
            return f"{name} must be a string"
    return None


def _input_item(item: object, where: str) -> str | None:
    if not isinstance(item, dict):
        return f"every item of `input` must be an object; `{where}` is {checks.describe(item)}"
    kind = item.get("type", "message")
    if not isinstance(kind, str):
        return f"`{where}.type` must be a string"
    if kind == "message":
        if item.get("role") not in _ROLES:
            return f"`{where}.role` must be one of {', '.join(_ROLES)}"
        return _content(item.get("content"), f"{where}.content")
    if kind in ("function_call", "function_call_output") and not isinstance(
        item.get("call_id"), str
    ):
        return f"`{where}.call_id` is required in a {kind} item (a string)"
    if kind == "function_call":
        if not isinstance(item.get("name"), str) or not item["name"]:
            return f"`{where}.name` is required in a function_call item (a non-empty string)"
        arguments = item.get("arguments")
        if arguments is not None and not isinstance(arguments, str | dict):
            return f"`{where}.arguments` must be a string of JSON"
    if kind == "function_call_output":
        return _content(item.get("output"), f"{where}.output")
    if kind == "reasoning":
        carried = item.get("encrypted_content")
        if carried is not None and not isinstance(carried, str):
            return f"`{where}.encrypted_content` must be a string"
    return None


def _content(content: object, where: str) -> str | None:
    if content is None or isinstance(content, str):
        return None
    if not isinstance(content, list):
        return f"`{where}` must be a string or an array of content parts"
    for number, part in enumerate(content):
        at = f"{where}[{number}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(kind, str):
            return f"`{at}` must be a content part object with a string `type`"
        field = _TEXT_PARTS.get(kind)
        if field is not None and not isinstance(part.get(field), str):
            return f"`{at}.{field}` is required in a `{kind}` part (a string)"
        if kind == "input_image":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if url is not None and not isinstance(url, str):
                return f"`{at}.image_url` must be a string"
    return None


def _tools(tools: list[dict[str, Any]] | None) -> str | None:
    for number, tool in enumerate(tools or ()):
        at = f"tools[{number}]"
        kind = tool.get("type")
        if not isinstance(kind, str):
            return f"`{at}.type` is required (a string)"
        if kind != "function":
            continue  # a hosted tool, which the upstream checks
        # Some clients nest the function as Chat Completions does; that form is read too.
        fields = tool["function"] if isinstance(tool.get("function"), dict) else tool
        if not isinstance(fields.get("name"), str) or not fields["name"]:
            return f"`{at}.name` is required (a non-empty string)"
        problem = checks.function_fields(fields, at)
        if problem is not None:
            return problem
    return None


def _tool_choice(choice: object) -> str | None:
    if choice is None or choice in ("auto", "none", "required"):
        return None
    if not isinstance(choice, dict) or not isinstance(choice.get("type"), str):
        return "`tool_choice` must be auto, none, required or an object with a `type`"
    if choice["type"] == "function" and not isinstance(choice.get("name"), str):
        return "`tool_choice.name` is required when its type is function (a string)"
    return None


def error_body(
    status: int, message: str, code: str | None = None, *, retry_after_s: float | None = None
) -> bytes:
    """An error in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`.

    The Responses API answers errors exactly as Chat Completions does.
    """
    return openai_chat.error_body(status, message, code)


def response_error(message: str, kind: FailureClass | None) -> dict[str, Any]:
    """The `error` object of a failed response for a gateway failure of class `kind`."""
    code = _ERROR_CODES.get(kind, _SERVER_ERROR) if kind is not None else _SERVER_ERROR
    return {
        "code": code,
        "message": message,
        "param": None,
        "type": kind.value if kind is not None else _SERVER_ERROR,
    }


def stream_error_event(message: str, kind: FailureClass | None = None) -> bytes:
    """A `response.failed` frame, as a Responses stream reports an error after its 200.

    `response.failed` rather than the top-level `error` event: coding agents read the
    failed response's `error.code` to decide whether to retry and how, and ignore `error`.
    Without the stream's own counter and response, the frame is numbered `UNSEQUENCED` and
    names `UNKNOWN_RESPONSE_ID`.
    """
    error = response_error(message, kind)
    response = response_object(UNKNOWN_RESPONSE_ID, "", 0, "failed", [], error=error)
    payload = {
        "type": "response.failed",
        "sequence_number": UNSEQUENCED,
        "response": response,
    }
    return b"event: response.failed\ndata: " + orjson.dumps(payload) + b"\n\n"


def response_object(
    response_id: str,
    model: str,
    created_at: float,
    status: str,
    output: list[dict[str, Any]],
    *,
    usage: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
    incomplete_reason: str | None = None,
    echo: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A `response` object; `echo` holds the request's settings a response repeats.

    Without `echo` the settings take their defaults: no tools, `auto` tool choice.
    """
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "model": model,
        "output": output,
        "usage": usage,
        "error": error,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": None,
        "top_p": None,
        "max_output_tokens": None,
        "tool_choice": "auto",
        "tools": [],
        "text": {"format": {"type": "text"}},
        "store": False,
    } | (echo or {})


def function_tool(name: str, description: str | None, parameters: dict[str, Any]) -> dict[str, Any]:
    """A function tool in the Responses form: flat, not nested under `function`."""
    # Responses tools are strict unless told otherwise, and a strict schema must close
    # every object and require every property: schemas written for other APIs rarely do.
    return {
        "type": "function",
        "name": name,
        "description": description,
        "parameters": parameters,
        "strict": False,
    }


def tool_choice(mode: str | None = None, *, name: str | None = None) -> str | dict[str, Any]:
    """A mode (`auto`, `none`, `required`) as it is, or the choice of the one tool `name`."""
    if name is not None:
        return {"type": "function", "name": name}
    assert mode is not None
    return mode


def message_item(item_id: str, texts: list[str], status: str = "completed") -> dict[str, Any]:
    """An assistant `message` output item with one `output_text` part per text."""
    return {
        "id": item_id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []} for text in texts],
    }


def function_call_item(
    item_id: str, call_id: str, name: str, arguments: str, status: str = "completed"
) -> dict[str, Any]:
    """A `function_call` output item."""
    return {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


def reasoning_item(
    item_id: str, summary: str, encrypted_content: str | None, status: str = "completed"
) -> dict[str, Any]:
    """A `reasoning` output item: its summary text and, when there is one, opaque content."""
    item: dict[str, Any] = {
        "id": item_id,
        "type": "reasoning",
        "status": status,
        "summary": [{"type": "summary_text", "text": summary}] if summary else [],
    }
    if encrypted_content:
        item["encrypted_content"] = encrypted_content
    return item


def usage_object(
    *, input_tokens: int, cached: int, cache_writes: int, output_tokens: int, reasoning: int
) -> dict[str, Any]:
    """A response's `usage`: `input_tokens` includes the cached and cache-written tokens."""
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": cache_writes},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }


def responses_id(upstream_id: str) -> str:
    """A Responses id (`resp_...`) for an upstream's reply id."""
    if upstream_id.startswith("resp_"):
        return upstream_id
    return f"resp_{upstream_id or 'gateway'}"


def _parts(value: object) -> list[dict[str, Any]]:
    return [part for part in value if isinstance(part, dict)] if isinstance(value, list) else []


def reasoning_text(item: dict[str, Any]) -> str:
    """A reasoning item's readable text: its summaries, else its raw reasoning text."""
    for key in ("summary", "content"):
        texts = [str(part.get("text") or "") for part in _parts(item.get(key))]
        if any(texts):
            return "\n\n".join(text for text in texts if text)
    return ""


def message_text(item: dict[str, Any]) -> str:
    """A message item's text: its `output_text` and `refusal` parts, joined."""
    parts = _parts(item.get("content"))
    return "".join(str(part.get("text") or part.get("refusal") or "") for part in parts)
