"""Gemini API requests, read into and written from the canonical form.

`GEMINI` is this API's codec; its replies and streams are in `gemini_stream`. The body is
rungway's form of a GenerateContentRequest: the wire fields plus `model` and `stream`
(see `protocol.gemini`).

Gemini matches a `functionResponse` to its call by name and order, or by `id` when the call
has one (see `gemini_read` for the ids the reader gives calls without). The writer sends the
canonical ids in both `id` fields, names each response after the call it answers, and puts
a turn's responses in the order of its calls.
"""

from __future__ import annotations

import base64
import itertools
import mimetypes
import re
from typing import Any
from urllib.parse import unquote_to_bytes

import orjson

from rungway.protocol.api import Api
from rungway.protocol.gemini import bare_model
from rungway.translate.canonical import (
    Image,
    Message,
    Part,
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
from rungway.translate.gemini_read import read_request
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

MAX_THINKING_BUDGET = 24576
"""The largest thinking budget every Gemini 2.5 model accepts (Flash's top; Pro's is
32,768): a larger one is lowered to it rather than refused.
https://ai.google.dev/gemini-api/docs/thinking"""

THINKS_UNLESS_TOLD = re.compile(r"gemini-2\.5-flash(?:-lite)?(?:-preview(?:-[\d-]+)?|-\d{3})?")
"""Models that may think unasked and can be told not to (thinkingBudget 0): Gemini 2.5
Flash and Flash-Lite. A request that asks for no reasoning turns theirs off; Gemini 2.5 Pro
and Gemini 3 cannot turn thinking off, and are left to their default.
https://ai.google.dev/gemini-api/docs/thinking"""

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

_JSON = "application/json"


class GeminiCodec:
    """The Gemini API's side of translation."""

    api: Api = Api.GEMINI

    def read_request(self, body: dict[str, Any]) -> Request:
        """A client's GenerateContentRequest (rungway's form) as a canonical request."""
        return read_request(body)

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
        generation = _write_generation(request, bare_model(model))
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
        if isinstance(part, ToolResult):
            # A function response holds JSON only: its images follow it as parts of the turn.
            images = (_write_image(item) for item in part.content if isinstance(item, Image))
            wire += [image for image in images if image is not None]
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
    """Function responses lead the turn after the calls, in the order of the calls, each
    with the images that follow it (a tool result's own)."""
    groups: list[list[dict[str, Any]]] = []
    rest: list[dict[str, Any]] = []
    attach = False  # the part before was a function response or one of its images
    for part in parts:
        if "functionResponse" in part:
            groups.append([part])
            attach = True
        elif attach and part.keys() & {"inlineData", "fileData"}:
            groups[-1].append(part)
        else:
            rest.append(part)
            attach = False
    ranked: list[dict[str, Any]] = []
    for call in (part["functionCall"] for part in calls if "functionCall" in part):
        response = next(
            (g for g in groups if g[0]["functionResponse"]["id"] == call.get("id")),
            next((g for g in groups if g[0]["functionResponse"]["name"] == call["name"]), None),
        )
        if response is not None:
            groups.remove(response)
            ranked += response
    return ranked + [part for group in groups for part in group] + rest


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


def _write_generation(request: Request, model: str) -> dict[str, Any]:
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
        if budget is not None:
            budget = min(budget, MAX_THINKING_BUDGET)
        thinking: dict[str, Any] = {"includeThoughts": True}
        if budget is not None:
            thinking["thinkingBudget"] = budget
        config["thinkingConfig"] = thinking
    elif THINKS_UNLESS_TOLD.fullmatch(model):
        # Unasked thinking counts against maxOutputTokens: a short limit could end the reply
        # with thoughts and no text (finishReason MAX_TOKENS).
        config["thinkingConfig"] = {"thinkingBudget": 0}
    return config
