"""OpenAI Chat Completions: request checks, error bodies, stream events and model lists."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from rungway.protocol import request_checks as checks
from rungway.protocol.failures import FailureClass

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "insufficient_quota",
    403: "permission_error",
    404: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}


def check_request(body: dict[str, Any]) -> str | None:
    """Return what is wrong with a chat request's shape, or None when it can be routed.

    Every field the gateway reads, rewrites or translates is checked, once, so nothing
    malformed reaches routing, a budget or an upstream.
    """
    problem = checks.model_name(body.get("model"))
    if problem is not None:
        return f"`model` {problem}"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "`messages` is required and must be a non-empty array of message objects"
    for number, message in enumerate(messages):
        problem = _message(message, f"messages[{number}]")
        if problem is not None:
            return problem
    found = checks.first_problem(body, _FIELDS)
    if found is not None:
        return f"`{found[0]}` {found[1]}"
    return _tools(body.get("tools")) or _tool_choice(body.get("tool_choice"))


_FIELDS: dict[str, checks.Check] = {
    "max_tokens": checks.output_limit,
    "max_completion_tokens": checks.output_limit,
    "stream": checks.boolean,
    "stream_options": lambda value: checks.mapping(value) or _include_usage(value),
    "temperature": checks.number,
    "top_p": checks.number,
    "stop": checks.string_or_strings,
    "tools": checks.objects,
    "parallel_tool_calls": checks.boolean,
    "reasoning_effort": checks.string,
    "user": checks.string,
}
"""Optional fields and their checks; tools and tool_choice are checked below."""
# Tuples, not sets: a value of any JSON type is compared, and arrays cannot be hashed.
_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_TOOL_CHOICES = ("auto", "none", "required")


def _include_usage(options: dict[str, Any]) -> str | None:
    usage = options.get("include_usage")
    return None if usage is None or isinstance(usage, bool) else "include_usage must be a boolean"


def _message(message: object, where: str) -> str | None:
    if not isinstance(message, dict):
        return f"`{where}` must be an object with `role` and `content`"
    role = message.get("role")
    if role not in _ROLES:
        return f"`{where}.role` must be one of {', '.join(_ROLES)}"
    for name in ("name", "reasoning_content"):
        if message.get(name) is not None and not isinstance(message[name], str):
            return f"`{where}.{name}` must be a string"
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        return f"`{where}.tool_call_id` is required in a tool message (a string)"
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        problem = _parts(content, where)
        if problem is not None:
            return problem
    calls = message.get("tool_calls")
    return None if calls is None else _tool_calls(calls, where)


def _parts(content: object, where: str) -> str | None:
    if not isinstance(content, list):
        return f"`{where}.content` must be a string or an array of content parts"
    for number, part in enumerate(content):
        at = f"{where}.content[{number}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(kind, str):
            return f"`{at}` must be a content part object with a string `type`"
        if kind in ("text", "refusal") and not isinstance(part.get(kind), str):
            return f"`{at}.{kind}` is required in a {kind} part (a string)"
        if kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str):
                return f"`{at}.image_url` must be an object with a `url` string"
    return None


def _tool_calls(calls: object, where: str) -> str | None:
    if not isinstance(calls, list):
        return f"`{where}.tool_calls` must be an array"
    for number, call in enumerate(calls):
        at = f"{where}.tool_calls[{number}]"
        if not isinstance(call, dict):
            return f"`{at}` must be a tool call object"
        if "function" not in call and call.get("type") not in (None, "function"):
            continue  # a custom tool's call, which the upstream checks
        function = call.get("function")
        if not isinstance(function, dict):
            return f"`{at}` must be an object with a `function` object"
        call_id = call.get("id")
        if call_id is not None and not isinstance(call_id, str):
            return f"`{at}.id` must be a string"
        if not isinstance(function.get("name"), str):
            return f"`{at}.function.name` is required (a string)"
        arguments = function.get("arguments")
        if arguments is not None and not isinstance(arguments, str | dict):
            return f"`{at}.function.arguments` must be a string of JSON"
    return None


def _tools(tools: list[dict[str, Any]] | None) -> str | None:
    for number, tool in enumerate(tools or ()):
        at = f"tools[{number}]"
        if not isinstance(tool.get("type", "function"), str):
            return f"`{at}.type` must be a string"
        if "function" not in tool:
            continue  # a custom tool, which the upstream checks
        function = tool["function"]
        if not isinstance(function, dict):
            return f"`{at}.function` must be an object"
        if not isinstance(function.get("name"), str) or not function["name"]:
            return f"`{at}.function.name` is required (a non-empty string)"
        problem = checks.function_fields(function, f"{at}.function")
        if problem is not None:
            return problem
    return None


def _tool_choice(choice: object) -> str | None:
    if choice is None or choice in _TOOL_CHOICES:
        return None
    if not isinstance(choice, dict) or not isinstance(choice.get("type"), str):
        return "`tool_choice` must be auto, none, required or an object with a `type`"
    function = choice.get("function")
    if choice["type"] == "function" and not (
        isinstance(function, dict) and isinstance(function.get("name"), str)
    ):
        return "`tool_choice.function.name` is required when its type is function (a string)"
    return None


def error_body(
    status: int, message: str, code: str | None = None, *, retry_after_s: float | None = None
) -> bytes:
    """An error in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`; a wait
    goes only in the `retry-after` header, as OpenAI sends it."""
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return orjson.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}})


def stream_error_event(message: str, kind: FailureClass | None = None) -> bytes:
    """An error delivered inside a 200 stream, as OpenAI sends it, followed by `[DONE]`."""
    code = kind.value if kind is not None else "upstream_error"
    payload = {"error": {"message": message, "type": "server_error", "param": None, "code": code}}
    return b"data: " + orjson.dumps(payload) + b"\n\ndata: [DONE]\n\n"


def model_list(models: Iterable[tuple[str, str]]) -> bytes:
    """`GET /v1/models` in OpenAI's shape; `models` holds (id, owner) pairs."""
    data = [
        {"id": model, "object": "model", "created": 0, "owned_by": owner} for model, owner in models
    ]
    return orjson.dumps({"object": "list", "data": data})
