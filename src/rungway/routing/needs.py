"""What a request needs of a model, read once per request from its parsed body.

`request_needs` reads tools and structured output from the body dict's top level, and walks
the messages for images only when the raw body holds the API's image marker at all (a
byte search: most requests carry no image, and a long agent conversation takes longer
to walk than to search); it parses nothing again. The prompt's size is a bound, not a
count: the raw body's length over `CHARS_PER_TOKEN` (English text runs about four
characters a token, and the body's JSON keys and escapes only add characters), less the
base64 of its images, which count `IMAGE_TOKENS` each instead. It can err both ways by a
margin; the upstream's own context-length error stays the last word, and this bound only
keeps a prompt far too large for a model from being sent there at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from rungway.protocol.api import Api

CHARS_PER_TOKEN = 4
IMAGE_TOKENS = 1_600
"""Tokens counted per image: about what the providers charge for a large one."""

StructuredNeed = Literal["json", "schema"]
"""Any JSON object, or JSON conforming to a schema."""
_Wants = tuple[bool, StructuredNeed | None]
"""Whether a request declares tools, and the structured output it asks for."""


@dataclass(frozen=True, slots=True)
class RequestNeeds:
    """What the request needs of a model: images read, tools called, a structured reply, and
    room for its prompt."""

    vision: bool = False
    tools: bool = False
    structured: StructuredNeed | None = None
    prompt_tokens: int = 0


NO_NEEDS = RequestNeeds()


class _Found:
    """What a walk over the body found: whether there are images, and their base64 length."""

    __slots__ = ("image_chars", "images")

    def __init__(self) -> None:
        self.images = 0
        self.image_chars = 0

    def image(self, data: object) -> None:
        self.images += 1
        if isinstance(data, str):
            self.image_chars += len(data)


def request_needs(api: Api, body: dict[str, Any], raw: bytes) -> RequestNeeds:
    """The needs of a request in `api`, from its parsed body and its raw bytes."""
    found = _Found()
    marker = _IMAGE_MARKERS[api]
    if marker in raw:
        _IMAGES[api](body, found)
    tools, structured = _WANTS[api](body)
    text_chars = max(0, len(raw) - found.image_chars)
    tokens = text_chars // CHARS_PER_TOKEN + found.images * IMAGE_TOKENS
    return RequestNeeds(found.images > 0, tools, structured, tokens)


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _chat_images(body: dict[str, Any], found: _Found) -> None:
    for message in _list(body.get("messages")):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and part.get("type") == "image_url":
                    image = part.get("image_url")
                    found.image(image.get("url") if isinstance(image, dict) else image)


def _chat_wants(body: dict[str, Any]) -> _Wants:
    tools = bool(body.get("tools")) or bool(body.get("functions"))
    return tools, _openai_format(_dict(body.get("response_format")), "json_schema")


def _responses_images(body: dict[str, Any], found: _Found) -> None:
    for item in _list(body.get("input")):
        if not isinstance(item, dict):
            continue
        content = item.get("content") if "content" in item else item.get("output")
        for part in _list(content):
            if isinstance(part, dict) and part.get("type") == "input_image":
                found.image(part.get("image_url"))


def _responses_wants(body: dict[str, Any]) -> _Wants:
    spec = _dict(_dict(body.get("text")).get("format"))
    return bool(body.get("tools")), _openai_format(spec, "schema")


def _openai_format(spec: dict[str, Any], schema_key: str) -> StructuredNeed | None:
    kind = spec.get("type")
    if kind == "json_object":
        return "json"
    if kind == "json_schema":
        # Chat nests the schema under `json_schema`; Responses holds it in the format itself.
        holder = _dict(spec.get("json_schema")) if schema_key == "json_schema" else spec
        return "schema" if isinstance(holder.get("schema"), dict) else "json"
    return None


def _anthropic_images(body: dict[str, Any], found: _Found) -> None:
    for message in _list(body.get("messages")):
        content = message.get("content") if isinstance(message, dict) else None
        for block in _list(content):
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "image":
                found.image(_dict(block.get("source")).get("data"))
            elif kind == "tool_result":
                for item in _list(block.get("content")):
                    if isinstance(item, dict) and item.get("type") == "image":
                        found.image(_dict(item.get("source")).get("data"))


def _anthropic_wants(body: dict[str, Any]) -> _Wants:
    structured: StructuredNeed | None = None
    if _dict(_dict(body.get("output_config")).get("format")):
        structured = "schema"
    return bool(body.get("tools")), structured


def _gemini_images(body: dict[str, Any], found: _Found) -> None:
    # The wire is camelCase; Google's libraries also accept snake_case.
    for content in _list(body.get("contents")):
        for part in _list(_dict(content).get("parts")):
            if not isinstance(part, dict):
                continue
            inline = part.get("inlineData") or part.get("inline_data")
            linked = part.get("fileData") or part.get("file_data")
            for media in (_dict(inline), _dict(linked)):
                mime = media.get("mimeType") or media.get("mime_type")
                if isinstance(mime, str) and mime.startswith("image/"):
                    found.image(media.get("data"))


def _gemini_wants(body: dict[str, Any]) -> _Wants:
    config = _dict(body.get("generationConfig") or body.get("generation_config"))
    structured: StructuredNeed | None = None
    for key in ("responseJsonSchema", "response_json_schema", "responseSchema", "response_schema"):
        if config.get(key) is not None:
            structured = "schema"
            break
    else:
        mime = config.get("responseMimeType") or config.get("response_mime_type")
        if mime == "application/json":
            structured = "json"
    return bool(body.get("tools")), structured


_IMAGE_MARKERS: dict[Api, bytes] = {
    Api.OPENAI_CHAT: b"image_url",
    Api.OPENAI_RESPONSES: b"input_image",
    Api.ANTHROPIC_MESSAGES: b"image",
    Api.GEMINI: b"image/",
}
"""What every image part of each API holds in its raw JSON (its type, or its MIME type)."""
_IMAGES: dict[Api, Callable[[dict[str, Any], _Found], None]] = {
    Api.OPENAI_CHAT: _chat_images,
    Api.OPENAI_RESPONSES: _responses_images,
    Api.ANTHROPIC_MESSAGES: _anthropic_images,
    Api.GEMINI: _gemini_images,
}
_WANTS: dict[Api, Callable[[dict[str, Any]], _Wants]] = {
    Api.OPENAI_CHAT: _chat_wants,
    Api.OPENAI_RESPONSES: _responses_wants,
    Api.ANTHROPIC_MESSAGES: _anthropic_wants,
    Api.GEMINI: _gemini_wants,
}
