"""Gemini's GenerateContent payloads as the simulated model reads and writes them.

Requests are checked the way the real API checks them: an unknown top-level field is a 400
(`Unknown name "x": Cannot find field.`; proto JSON accepts both the lowerCamel and the
snake_case spelling), `contents` is required and each turn's role is `user` or `model`.
Replies are `GenerateContentResponse` objects: one candidate whose parts hold a thought
summary (when `thinkingConfig.includeThoughts`), the text or a `functionCall`, then
`finishReason` and `usageMetadata` (docs/provider-signals.md A6; common wire facts: the
thought tokens are not part of `candidatesTokenCount`, cached tokens are part of
`promptTokenCount`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from rungway.sim.exchange import Reply
from rungway.sim.quota.google_errors import invalid_argument
from rungway.sim.wire.completion import Completion, ToolTurn, estimate_input_tokens

# The fields of GenerateContentRequest (https://ai.google.dev/api/generate-content), each in
# its lowerCamel and snake_case spelling.
_REQUEST_FIELDS = (
    ("contents", "contents"),
    ("tools", "tools"),
    ("toolConfig", "tool_config"),
    ("safetySettings", "safety_settings"),
    ("systemInstruction", "system_instruction"),
    ("generationConfig", "generation_config"),
    ("cachedContent", "cached_content"),
    ("model", "model"),
)
GEMINI_FIELDS = frozenset(name for pair in _REQUEST_FIELDS for name in pair)
CODE_ASSIST_FIELDS = GEMINI_FIELDS | {"labels", "session_id", "sessionId"}
"""Code Assist's request also takes the Vertex AI `labels` and the CLI's `session_id`."""
ROLES = frozenset({"user", "model"})
THOUGHT_TEXT = (
    "**Planning the reply**\n\nThe simulated model thinks for a moment before it answers."
)
THOUGHT_TOKENS = len(THOUGHT_TEXT.split())
CACHED_CONTENT_TOKENS = 1024
"""Tokens a request naming `cachedContent` reads from the cache: the smallest cache
Gemini 2.5 Flash allows (https://ai.google.dev/gemini-api/docs/caching)."""


def field(body: Mapping[str, Any], camel: str, snake: str) -> Any:
    """A field by either spelling (proto JSON accepts both)."""
    return body[camel] if camel in body else body.get(snake)


@dataclass(frozen=True, slots=True)
class Prompt:
    """What the simulated model reads from a valid request."""

    input_tokens: int
    cached_tokens: int
    max_tokens: int | None
    thoughts: bool
    """Whether the reply shows a thought summary (`thinkingConfig.includeThoughts`)."""
    thought_tokens: int
    """What the reply reports as `thoughtsTokenCount` (0: none)."""
    tools: ToolTurn


def _object(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def read_request(
    body: Any, allowed: frozenset[str] = GEMINI_FIELDS, thinking: int = 0
) -> Prompt | Reply:
    """Validate a GenerateContentRequest; the real API's 400 when it would refuse it.

    `thinking` is how many tokens the model thinks unasked (the scenario's
    `response.thought_tokens`); a `thinkingBudget` of 0 turns thinking off, and a thought
    summary costs at least its own length.
    """
    if not isinstance(body, dict):
        message = "Invalid JSON payload received. Expected an object."
        return invalid_argument(message, violation=True)
    for name in body:
        if name not in allowed:
            message = f'Invalid JSON payload received. Unknown name "{name}": Cannot find field.'
            return invalid_argument(message, violation=True)
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return invalid_argument("* GenerateContentRequest.contents: contents is not specified\n")
    for index, content in enumerate(contents):
        if not isinstance(content, dict):
            message = f"Invalid value at 'contents[{index}]', expected an object."
            return invalid_argument(message, violation=True, field=f"contents[{index}]")
        if "role" in content and content["role"] not in ROLES:
            return invalid_argument("Please use a valid role: user, model.")
        if not isinstance(content.get("parts"), list) or not content["parts"]:
            return invalid_argument(
                f"* GenerateContentRequest.contents[{index}].parts: contents.parts must not "
                "be empty.\n"
            )
    config = _object(field(body, "generationConfig", "generation_config"))
    max_tokens = field(config, "maxOutputTokens", "max_output_tokens")
    if max_tokens is not None and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
    ):
        message = "* GenerateContentRequest.generation_config.max_output_tokens: must be positive"
        return invalid_argument(message + "\n")
    cached = CACHED_CONTENT_TOKENS if field(body, "cachedContent", "cached_content") else 0
    thinking_config = thinking_of(config)
    budget = field(thinking_config, "thinkingBudget", "thinking_budget")
    asked = field(thinking_config, "includeThoughts", "include_thoughts") is True
    shown = asked and budget != 0
    spent = 0 if budget == 0 else max(thinking, THOUGHT_TOKENS if shown else 0)
    return Prompt(
        input_tokens=prompt_tokens(body) + cached,
        cached_tokens=cached,
        max_tokens=max_tokens,
        thoughts=shown,
        thought_tokens=spent,
        tools=tool_turn(body),
    )


def thinking_of(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """A generation config's `thinkingConfig` (empty when absent)."""
    return _object(field(config, "thinkingConfig", "thinking_config"))


def prompt_tokens(body: Mapping[str, Any]) -> int:
    """The input estimate of a request (or countTokens body): its turns, system and tools."""
    prompt = {
        "contents": body.get("contents"),
        "system": field(body, "systemInstruction", "system_instruction"),
        "tools": body.get("tools"),
    }
    return estimate_input_tokens({key: value for key, value in prompt.items() if value})


def _result_text(response: Any) -> str:
    # Gemini CLI sends `{"output": "..."}`; other clients `{"result": ...}` or any object.
    if isinstance(response, dict):
        for key in ("output", "result", "content"):
            if isinstance(response.get(key), str):
                return str(response[key])
    return orjson.dumps(response).decode()


def tool_turn(body: Mapping[str, Any]) -> ToolTurn:
    """Function declarations offered (none in mode `NONE`) and a last-turn functionResponse."""
    calling = _object(field(_object(field(body, "toolConfig", "tool_config")), *_FCC))
    offered: set[str] = set()
    for tool in body.get("tools") or ():
        declarations = field(_object(tool), "functionDeclarations", "function_declarations")
        for declaration in declarations if isinstance(declarations, list) else ():
            if isinstance(declaration, dict) and isinstance(declaration.get("name"), str):
                offered.add(declaration["name"])
    names = frozenset() if calling.get("mode") == "NONE" else frozenset(offered)
    contents = body.get("contents")
    last = _object(contents[-1]) if isinstance(contents, list) and contents else {}
    for part in last.get("parts") or ():
        reply = field(_object(part), "functionResponse", "function_response")
        if isinstance(reply, dict):
            return ToolTurn(names, _result_text(reply.get("response")))
    return ToolTurn(names)


_FCC = ("functionCallingConfig", "function_calling_config")


def usage_metadata(
    prompt: Prompt, candidates: int | None, thoughts: int | None = None
) -> dict[str, Any]:
    """`usageMetadata`; a stream's earlier chunks carry only the prompt's counts."""
    usage: dict[str, Any] = {"promptTokenCount": prompt.input_tokens}
    total = prompt.input_tokens
    if candidates is not None:
        usage["candidatesTokenCount"] = candidates
        total += candidates
    if prompt.cached_tokens:
        usage["cachedContentTokenCount"] = prompt.cached_tokens
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
        total += thoughts
    usage["totalTokenCount"] = total
    details = [{"modality": "TEXT", "tokenCount": prompt.input_tokens}]
    usage["promptTokensDetails"] = details
    if prompt.cached_tokens:
        usage["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": prompt.cached_tokens}]
    return usage


def finish_reason(completion: Completion) -> str:
    """MAX_TOKENS when the output cap cut the reply, else STOP (a function call too)."""
    return "MAX_TOKENS" if completion.truncated else "STOP"


def answer_parts(completion: Completion, text: str | None = None) -> list[dict[str, Any]]:
    """The reply's parts: its text (or `text` given) or its function call."""
    call = completion.tool_call
    if call is not None:
        return [{"functionCall": {"name": call.name, "args": call.input}}]
    return [{"text": completion.text if text is None else text}]


def candidate(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    """One candidate; `finishReason` only on the last (or only) one of a reply."""
    entry: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
    if finish is not None:
        entry["finishReason"] = finish
    entry["index"] = 0
    return entry


def whole_reply(
    prompt: Prompt, completion: Completion, model_version: str, response_id: str
) -> dict[str, Any]:
    """A complete GenerateContentResponse."""
    parts = answer_parts(completion)
    thoughts = prompt.thought_tokens
    if prompt.thoughts:
        parts.insert(0, {"text": THOUGHT_TEXT, "thought": True})
    return {
        "candidates": [candidate(parts, finish_reason(completion))],
        "usageMetadata": usage_metadata(prompt, completion.output_tokens, thoughts),
        "modelVersion": model_version,
        "responseId": response_id,
    }


def stream_chunks(
    prompt: Prompt,
    completion: Completion,
    chunk_tokens: int,
    model_version: str,
    response_id: str,
) -> list[dict[str, Any]]:
    """The GenerateContentResponse chunks of a stream: a thought chunk first when asked,
    then the text in pieces (a function call whole); the last carries `finishReason` and
    the full usage, with no terminator after it."""
    pieces: list[list[dict[str, Any]]] = []
    if prompt.thoughts:
        pieces.append([{"text": THOUGHT_TEXT, "thought": True}])
    if completion.tool_call is not None:
        pieces.append(answer_parts(completion))
    else:
        pieces.extend(answer_parts(completion, text) for text in completion.chunks(chunk_tokens))
    thoughts = prompt.thought_tokens
    chunks = []
    for index, parts in enumerate(pieces):
        last = index == len(pieces) - 1
        finish = finish_reason(completion) if last else None
        usage = (
            usage_metadata(prompt, completion.output_tokens, thoughts)
            if last
            else usage_metadata(prompt, None)
        )
        chunks.append(
            {
                "candidates": [candidate(parts, finish)],
                "usageMetadata": usage,
                "modelVersion": model_version,
                "responseId": response_id,
            }
        )
    return chunks
