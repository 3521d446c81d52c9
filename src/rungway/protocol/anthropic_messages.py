"""Anthropic Messages: request checks, error bodies, stream events and model lists."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from rungway.protocol import request_checks as checks
from rungway.protocol.failures import FailureClass

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
"""Anthropic's `error.type` for each HTTP status it uses."""

_STREAM_ERROR_TYPES = {
    FailureClass.OVERLOADED: "overloaded_error",
    FailureClass.RATE_LIMITED: "rate_limit_error",
    FailureClass.QUOTA_EXHAUSTED: "rate_limit_error",
    FailureClass.TIMEOUT: "api_error",
}


def check_request(body: dict[str, Any], *, count_tokens: bool = False) -> str | None:
    """Return what is wrong with a Messages request's shape, or None when it can be routed.

    Every field the gateway reads, rewrites or translates is checked, once, so nothing
    malformed reaches routing, a budget or an upstream.
    """
    problem = checks.model_name(body.get("model"))
    if problem is not None:
        return f"model: {problem}"
    messages = body.get("messages")
    if not isinstance(messages, list):
        kind = checks.describe(messages)
        return f"messages: Field required (an array of message objects, not {kind})"
    for number, message in enumerate(messages):
        problem = _message(message, f"messages.{number}")
        if problem is not None:
            return problem
    if not count_tokens:
        max_tokens = body.get("max_tokens")
        if max_tokens is None:
            return "max_tokens: Field required (a positive integer)"
        problem = checks.output_limit(max_tokens)
        if problem is not None:
            return f"max_tokens: {problem}"
    found = checks.first_problem(body, _FIELDS)
    if found is not None:
        return f"{found[0]}: {found[1]}"
    return (
        _system(body.get("system"))
        or _tools(body.get("tools"))
        or _tool_choice(body.get("tool_choice"))
        or _thinking(body.get("thinking"), body.get("output_config"))
        or _user_id(body.get("metadata"))
    )


_FIELDS: dict[str, checks.Check] = {
    "stream": checks.boolean,
    "temperature": checks.number,
    "top_p": checks.number,
    "stop_sequences": checks.strings,
    "metadata": checks.mapping,
    "thinking": checks.mapping,
    "output_config": checks.mapping,
    "tools": checks.objects,
    "tool_choice": checks.mapping,
}
"""Optional fields and their checks; their inner fields are checked below."""
# Tuples, not sets: a value of any JSON type is compared, and arrays cannot be hashed. A
# mid-conversation system turn is read too.
_ROLES = ("user", "assistant", "system")
_TOOL_CHOICES = ("auto", "any", "tool", "none")


def _message(message: object, where: str) -> str | None:
    if not isinstance(message, dict):
        return f"{where}: must be an object with `role` and `content`"
    role = message.get("role")
    if role not in _ROLES:
        return f"{where}.role: must be 'user' or 'assistant', not {_shown(role)}"
    content = message.get("content")
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        return f"{where}.content: must be a string or an array of content blocks"
    for number, block in enumerate(content):
        problem = _block(block, f"{where}.content.{number}")
        if problem is not None:
            return problem
    return None


# The string fields each kind of content block needs (Optional ones are checked when set).
_BLOCK_STRINGS = {
    "text": ("text",),
    "tool_use": ("id", "name"),
    "tool_result": ("tool_use_id",),
    "thinking": ("thinking",),
    "redacted_thinking": ("data",),
}


def _block(block: object, where: str) -> str | None:
    if not isinstance(block, dict):
        return f"{where}: must be a content block object"
    kind = block.get("type")
    if not isinstance(kind, str):
        return f"{where}.type: Field required (a string)"
    for name in _BLOCK_STRINGS.get(kind, ()):
        if not isinstance(block.get(name), str):
            return f"{where}.{name}: Field required (a string)"
    signature = block.get("signature")
    if signature is not None and not isinstance(signature, str):
        return f"{where}.signature: must be a string"
    if kind == "tool_use" and "input" in block and not isinstance(block["input"], dict):
        return f"{where}.input: must be an object"
    if kind == "image":
        return _image(block, where)
    if kind == "tool_result":
        if block.get("is_error") is not None and not isinstance(block["is_error"], bool):
            return f"{where}.is_error: must be a boolean"
        return _result_content(block.get("content"), f"{where}.content")
    return None


def _image(block: dict[str, Any], where: str) -> str | None:
    source = block.get("source")
    if not isinstance(source, dict) or not isinstance(source.get("type"), str):
        return f"{where}.source: Field required (an object with a `type`)"
    for name in {"base64": ("data", "media_type"), "url": ("url",)}.get(source["type"], ()):
        if not isinstance(source.get(name), str):
            return f"{where}.source.{name}: Field required (a string)"
    return None


def _result_content(content: object, where: str) -> str | None:
    if content is None or isinstance(content, str):
        return None
    if not isinstance(content, list):
        return f"{where}: must be a string or an array of content blocks"
    for number, block in enumerate(content):
        problem = _block(block, f"{where}.{number}")
        if problem is not None:
            return problem
    return None


def _system(system: object) -> str | None:
    if system is None or isinstance(system, str):
        return None
    if not isinstance(system, list):
        return "system: must be a string or an array of text blocks"
    for number, block in enumerate(system):
        problem = _block(block, f"system.{number}")
        if problem is not None:
            return problem
    return None


def _tools(tools: list[dict[str, Any]] | None) -> str | None:
    for number, tool in enumerate(tools or ()):
        where = f"tools.{number}"
        kind = tool.get("type")
        if kind is not None and not isinstance(kind, str):
            return f"{where}.type: must be a string"
        if kind not in (None, "custom"):
            continue  # a server tool, which Anthropic itself runs and checks
        if not isinstance(tool.get("name"), str) or not tool["name"]:
            return f"{where}.name: Field required (a non-empty string)"
        if not isinstance(tool.get("input_schema"), dict):
            return f"{where}.input_schema: Field required (a JSON Schema object)"
        description = tool.get("description")
        if description is not None and not isinstance(description, str):
            return f"{where}.description: must be a string"
    return None


def _tool_choice(choice: dict[str, Any] | None) -> str | None:
    if choice is None:
        return None
    kind = choice.get("type")
    if kind not in _TOOL_CHOICES:
        return f"tool_choice.type: must be one of auto, any, tool or none, not {_shown(kind)}"
    if kind == "tool" and not isinstance(choice.get("name"), str):
        return "tool_choice.name: Field required (a string) when type is tool"
    parallel = choice.get("disable_parallel_tool_use")
    if parallel is not None and not isinstance(parallel, bool):
        return "tool_choice.disable_parallel_tool_use: must be a boolean"
    return None


def _thinking(thinking: dict[str, Any] | None, config: dict[str, Any] | None) -> str | None:
    if thinking is not None:
        kind = thinking.get("type")
        if not isinstance(kind, str):
            return "thinking.type: Field required (a string)"
        budget = thinking.get("budget_tokens")
        if kind == "enabled" or budget is not None:
            problem = checks.output_limit(budget)
            if problem is not None:
                return f"thinking.budget_tokens: {problem}"
    effort = (config or {}).get("effort")
    if effort is not None and not isinstance(effort, str):
        return "output_config.effort: must be a string"
    return None


def _user_id(metadata: dict[str, Any] | None) -> str | None:
    user = (metadata or {}).get("user_id")
    if user is not None and not isinstance(user, str):
        return "metadata.user_id: must be a string"
    return None


def _shown(value: object) -> str:
    return repr(value) if isinstance(value, str) and len(value) <= 40 else checks.describe(value)


def error_body(
    status: int,
    message: str,
    code: str | None = None,
    request_id: str | None = None,
    *,
    retry_after_s: float | None = None,
) -> bytes:
    """An error in Anthropic's shape: `{"type": "error", "error": {"type", "message"}}`; a
    wait goes only in the `retry-after` header, as Anthropic sends it.

    The gateway's own `code` (such as `subscription_unavailable`) rides along in `error`,
    where clients that know it can read it and the rest ignore it.
    """
    kind = ERROR_TYPES.get(status, "api_error")
    error: dict[str, Any] = {"type": kind, "message": message}
    if code is not None:
        error["code"] = code
    payload: dict[str, Any] = {"type": "error", "error": error}
    if request_id is not None:
        payload["request_id"] = request_id
    return orjson.dumps(payload)


def stream_error_event(message: str, kind: FailureClass | None = None) -> bytes:
    """An `event: error` frame, as Anthropic sends one inside a 200 stream."""
    error_type = _STREAM_ERROR_TYPES.get(kind, "api_error") if kind else "api_error"
    payload = {"type": "error", "error": {"type": error_type, "message": message}}
    return b"event: error\ndata: " + orjson.dumps(payload) + b"\n\n"


def model_list(models: Iterable[tuple[str, str]]) -> bytes:
    """`GET /v1/models` in Anthropic's shape; `models` holds (id, display name) pairs."""
    data = [
        {"type": "model", "id": model, "display_name": name, "created_at": "1970-01-01T00:00:00Z"}
        for model, name in models
    ]
    return orjson.dumps(
        {
            "data": data,
            "has_more": False,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }
    )
