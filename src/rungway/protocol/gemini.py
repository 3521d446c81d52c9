"""The Gemini API (generateContent): request checks, error bodies, stream events and models.

Inside rungway a Gemini request body is the wire `GenerateContentRequest` plus two keys the
ingress takes from the URL: `model` (without its `models/` prefix) and `stream` (a
boolean); adapters remove both before sending. Google's JSON parser accepts each field in
camelCase or snake_case (`systemInstruction` or `system_instruction`); `field` reads either.
https://ai.google.dev/api/generate-content
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

import orjson

from rungway.protocol import request_checks as checks
from rungway.protocol.failures import FailureClass

STATUS_NAMES: Final[dict[int, str]] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    402: "RESOURCE_EXHAUSTED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "UNIMPLEMENTED",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
    529: "UNAVAILABLE",
}
"""The `google.rpc.Code` name Google's APIs pair with each HTTP status.
https://github.com/googleapis/googleapis/blob/master/google/rpc/code.proto"""

_STREAM_ERRORS: Final[dict[FailureClass, tuple[int, str]]] = {
    FailureClass.RATE_LIMITED: (429, "RESOURCE_EXHAUSTED"),
    FailureClass.QUOTA_EXHAUSTED: (429, "RESOURCE_EXHAUSTED"),
    FailureClass.OVERLOADED: (503, "UNAVAILABLE"),
    FailureClass.TIMEOUT: (504, "DEADLINE_EXCEEDED"),
}

ERROR_DOMAIN: Final = "rungway"
"""The `ErrorInfo.domain` of errors the gateway itself gives."""

GENERATION_METHODS: Final = ("generateContent", "streamGenerateContent", "countTokens")
"""The methods the gateway serves for every model it lists."""

ROLES: Final = ("user", "model", "function")
"""Content roles; `function` is the older name for a turn of function responses."""
FUNCTION_MODES: Final = ("AUTO", "ANY", "NONE", "VALIDATED", "MODE_UNSPECIFIED")
_MODEL_PREFIX: Final = "models/"
_CAMEL: Final = re.compile(r"(?<!^)(?=[A-Z])")


@functools.cache
def _snake(name: str) -> str:
    return _CAMEL.sub("_", name).lower()


def field(value: Mapping[str, Any], name: str) -> Any:
    """`value[name]` by its camelCase `name` or its snake_case twin; None when absent."""
    found = value.get(name)
    return value.get(_snake(name)) if found is None else found


def bare_model(name: str) -> str:
    """A model name without its resource prefix: `models/gemini-2.5-pro` -> `gemini-2.5-pro`."""
    return name.removeprefix(_MODEL_PREFIX)


def check_request(body: dict[str, Any]) -> str | None:
    """Return what is wrong with a GenerateContentRequest's shape, or None when it can be
    routed.

    Every field the gateway reads, rewrites or translates is checked, once, so nothing
    malformed reaches routing, a budget or an upstream. Fields the gateway only forwards
    (new part kinds, server-side tools) are left to the upstream.
    """
    problem = checks.model_name(body.get("model"))
    if problem is not None:
        return f"model {problem}"
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        return "stream must be a boolean"
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return "contents is required and must be a non-empty array of Content objects"
    for number, content in enumerate(contents):
        problem = _content(content, f"contents[{number}]")
        if problem is not None:
            return problem
    return (
        _system(field(body, "systemInstruction"))
        or _tools(body.get("tools"))
        or _tool_config(field(body, "toolConfig"))
        or _generation(field(body, "generationConfig"))
        or _safety(field(body, "safetySettings"))
        or _string(field(body, "cachedContent"), "cachedContent")
    )


def check_count_request(body: dict[str, Any]) -> str | None:
    """Return what is wrong with a countTokens request: `contents`, or a whole
    `generateContentRequest`; None when it can be counted."""
    problem = checks.model_name(body.get("model"))
    if problem is not None:
        return f"model {problem}"
    inner = field(body, "generateContentRequest")
    if inner is not None:
        if not isinstance(inner, dict):
            return f"generateContentRequest must be an object, not {checks.describe(inner)}"
        return check_request({**inner, "model": inner.get("model") or body["model"]})
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return "contents is required and must be a non-empty array of Content objects"
    for number, content in enumerate(contents):
        problem = _content(content, f"contents[{number}]")
        if problem is not None:
            return problem
    return None


def _content(content: object, where: str) -> str | None:
    if not isinstance(content, dict):
        return f"{where} must be a Content object with `role` and `parts`"
    role = content.get("role")
    if role is not None and role not in ROLES:
        return f"{where}.role must be 'user' or 'model', not {_shown(role)}"
    parts = content.get("parts")
    if not isinstance(parts, list):
        return f"{where}.parts is required and must be an array of Part objects"
    for number, part in enumerate(parts):
        problem = _part(part, f"{where}.parts[{number}]")
        if problem is not None:
            return problem
    return None


# The fields of each kind of part the gateway translates, and the strings each needs.
_PART_STRINGS: Final = {
    "inlineData": ("mimeType", "data"),
    "fileData": ("fileUri",),
    "functionCall": ("name",),
    "functionResponse": ("name",),
}


def _part(part: object, where: str) -> str | None:
    if not isinstance(part, dict):
        return f"{where} must be a Part object"
    thought = part.get("thought")
    if thought is not None and not isinstance(thought, bool):
        return f"{where}.thought must be a boolean"
    problem = _string(part.get("text"), f"{where}.text") or _string(
        field(part, "thoughtSignature"), f"{where}.thoughtSignature"
    )
    for kind in _PART_STRINGS:
        value = field(part, kind)
        if problem is None and value is not None:
            problem = _part_data(value, kind, f"{where}.{kind}")
    return problem


def _part_data(value: object, kind: str, where: str) -> str | None:
    """The object a part holds (its inline data, file, call or response)."""
    if not isinstance(value, dict):
        return f"{where} must be an object"
    for name in _PART_STRINGS[kind]:
        if not isinstance(field(value, name), str) or not field(value, name):
            return f"{where}.{name} is required (a non-empty string)"
    media_type = field(value, "mimeType")
    if media_type is not None and not isinstance(media_type, str):
        return f"{where}.mimeType must be a string"
    for name in ("args", "response"):
        if value.get(name) is not None and not isinstance(value[name], dict):
            return f"{where}.{name} must be an object"
    return _string(value.get("id"), f"{where}.id") or _response_parts(
        value.get("parts"), f"{where}.parts"
    )


def _response_parts(parts: object, where: str) -> str | None:
    """A multimodal function response's own parts: images, each a Part."""
    if parts is None:
        return None
    if not isinstance(parts, list):
        return f"{where} must be an array of Part objects"
    for number, part in enumerate(parts):
        problem = _part(part, f"{where}[{number}]")
        if problem is not None:
            return problem
    return None


def _system(system: object) -> str | None:
    if system is None:
        return None
    if not isinstance(system, dict):
        return "systemInstruction must be a Content object with `parts`"
    parts = system.get("parts")
    if not isinstance(parts, list):
        return "systemInstruction.parts is required and must be an array of Part objects"
    for number, part in enumerate(parts):
        problem = _part(part, f"systemInstruction.parts[{number}]")
        if problem is not None:
            return problem
    return None


def _tools(tools: object) -> str | None:
    if tools is None:
        return None
    problem = checks.objects(tools)
    if problem is not None:
        return f"tools {problem}"
    assert isinstance(tools, list)
    for number, tool in enumerate(tools):
        declarations = field(tool, "functionDeclarations")
        if declarations is None:
            continue  # a server-side tool (search, code execution), which the upstream checks
        problem = checks.objects(declarations)
        if problem is not None:
            return f"tools[{number}].functionDeclarations {problem}"
        for index, declaration in enumerate(declarations):
            at = f"tools[{number}].functionDeclarations[{index}]"
            name = declaration.get("name")
            if not isinstance(name, str) or not name:
                return f"{at}.name is required (a non-empty string)"
            problem = _string(declaration.get("description"), f"{at}.description")
            if problem is not None:
                return problem
            for schema in ("parameters", "parametersJsonSchema", "response"):
                value = field(declaration, schema)
                if value is not None and not isinstance(value, dict | bool):
                    return f"{at}.{schema} must be a schema object"
    return None


def _tool_config(config: object) -> str | None:
    if config is None:
        return None
    if not isinstance(config, dict):
        return f"toolConfig must be an object, not {checks.describe(config)}"
    calling = field(config, "functionCallingConfig")
    if calling is None:
        return None
    if not isinstance(calling, dict):
        return "toolConfig.functionCallingConfig must be an object"
    mode = calling.get("mode")
    if mode is not None and (not isinstance(mode, str) or mode.upper() not in FUNCTION_MODES):
        modes = ", ".join(FUNCTION_MODES[:4])
        return f"toolConfig.functionCallingConfig.mode must be one of {modes}, not {_shown(mode)}"
    names = field(calling, "allowedFunctionNames")
    problem = None if names is None else checks.strings(names)
    if problem is not None:
        return f"toolConfig.functionCallingConfig.allowedFunctionNames {problem}"
    return None


_GENERATION: Final[dict[str, checks.Check]] = {
    "maxOutputTokens": checks.output_limit,
    "temperature": checks.number,
    "topP": checks.number,
    "topK": checks.number,
    "candidateCount": checks.output_limit,
    "stopSequences": checks.strings,
    "responseMimeType": checks.string,
    "responseSchema": checks.mapping,
    "responseModalities": checks.strings,
    "presencePenalty": checks.number,
    "frequencyPenalty": checks.number,
    "seed": checks.number,
    "thinkingConfig": checks.mapping,
}
"""generationConfig's fields the gateway reads, and their checks."""


def _generation(config: object) -> str | None:
    if config is None:
        return None
    if not isinstance(config, dict):
        return f"generationConfig must be an object, not {checks.describe(config)}"
    for name, check in _GENERATION.items():
        value = field(config, name)
        problem = None if value is None else check(value)
        if problem is not None:
            return f"generationConfig.{name} {problem}"
    schema = field(config, "responseJsonSchema")
    if schema is not None and not isinstance(schema, dict | bool):
        return "generationConfig.responseJsonSchema must be a JSON Schema object"
    return _thinking(field(config, "thinkingConfig"))


def _thinking(config: dict[str, Any] | None) -> str | None:
    if config is None:
        return None
    budget = field(config, "thinkingBudget")
    # -1 asks for a dynamic budget and 0 turns thinking off.
    if budget is not None and (
        isinstance(budget, bool) or not isinstance(budget, int) or budget < -1
    ):
        return "generationConfig.thinkingConfig.thinkingBudget must be an integer of -1 or more"
    include = field(config, "includeThoughts")
    if include is not None and not isinstance(include, bool):
        return "generationConfig.thinkingConfig.includeThoughts must be a boolean"
    return _string(field(config, "thinkingLevel"), "generationConfig.thinkingConfig.thinkingLevel")


def _safety(settings: object) -> str | None:
    if settings is None:
        return None
    problem = checks.objects(settings)
    if problem is not None:
        return f"safetySettings {problem}"
    assert isinstance(settings, list)
    for number, setting in enumerate(settings):
        for name in ("category", "threshold"):
            if not isinstance(setting.get(name), str):
                return f"safetySettings[{number}].{name} is required (a string)"
    return None


def _string(value: object, where: str) -> str | None:
    return None if value is None or isinstance(value, str) else f"{where} must be a string"


def _shown(value: object) -> str:
    return repr(value) if isinstance(value, str) and len(value) <= 40 else checks.describe(value)


_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"


def error_object(status: int, message: str, code: str | None = None) -> dict[str, Any]:
    """`{"error": {"code", "message", "status", "details"?}}`, as Google's APIs answer.

    The gateway's own `code` (such as `subscription_unavailable`) rides in an `ErrorInfo`
    detail, where Google's clients already look for a machine-readable reason.
    """
    name = STATUS_NAMES.get(status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT")
    error: dict[str, Any] = {"code": status, "message": message, "status": name}
    if code is not None:
        error["details"] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": code.upper(),
                "domain": ERROR_DOMAIN,
            }
        ]
    return {"error": error}


def error_body(
    status: int, message: str, code: str | None = None, *, retry_after_s: float | None = None
) -> bytes:
    """An error in Google's shape: `{"error": {"code", "message", "status"}}`. A wait rides
    in a `RetryInfo` detail, where Google's clients read how long to back off."""
    error = error_object(status, message, code)
    if retry_after_s is not None:
        delay = {"@type": _RETRY_INFO, "retryDelay": f"{max(1, round(retry_after_s))}s"}
        error["error"].setdefault("details", []).append(delay)
    return orjson.dumps(error)


def stream_error_event(message: str, kind: FailureClass | None = None) -> bytes:
    """An error inside a 200 stream, as Google sends one: a `data:` event holding the error
    object. Google's streams have no terminator event; the error is the last one."""
    status, name = _STREAM_ERRORS.get(kind, (500, "INTERNAL")) if kind else (500, "INTERNAL")
    payload = {"error": {"code": status, "message": message, "status": name}}
    return b"data: " + orjson.dumps(payload) + b"\r\n\r\n"


def model_info(model: str, display_name: str | None = None) -> dict[str, Any]:
    """One `Model` resource as `GET /v1beta/models/{model}` answers it."""
    return {
        "name": _MODEL_PREFIX + bare_model(model),
        "baseModelId": bare_model(model),
        "version": "001",
        "displayName": display_name or bare_model(model),
        "description": f"{bare_model(model)}, served through this gateway",
        "supportedGenerationMethods": list(GENERATION_METHODS),
    }


def model_list(models: Iterable[str]) -> bytes:
    """`GET /v1beta/models` in Google's shape: `{"models": [Model, ...]}`."""
    return orjson.dumps({"models": [model_info(model) for model in models]})
