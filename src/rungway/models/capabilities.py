"""A model's capabilities, from a curated table of globs that config can extend.

Patterns are globs on the model name, matched case-insensitively; every matching row fills
the fields it names, later rows (and config rows, which come after the built-in ones) over
earlier ones. A field no row names stays unknown (None), and unknown means allowed: a plan
never skips a model for a capability nobody recorded.

The context window is the one fact a maintained source carries: genai-prices lists it for
most metered models (`rungway.pricing.prices.listed_context_window`), and the roster takes
it from there when no row here names one. Nothing maintained lists vision, tool use,
reasoning or structured output, hence the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from enum import StrEnum
from fnmatch import fnmatchcase
from functools import lru_cache


class Structured(StrEnum):
    """How a model takes structured output."""

    SCHEMA = "schema"
    """Its API constrains the reply to a JSON Schema (OpenAI's `json_schema`, Anthropic's
    `output_config.format`, Gemini's `responseSchema`)."""
    JSON = "json"
    """Only a JSON mode: any JSON object, no schema (DeepSeek's `json_object`)."""
    TOOL = "tool"
    """Only through a forced tool whose input schema is the schema (Claude before 4.5, whose
    API has no output format): the tool call's arguments become the reply's text."""
    NONE = "none"
    """Neither."""


@dataclass(frozen=True, slots=True)
class ModelCapabilities:
    """What a model can do; None is unknown, which routing treats as able."""

    vision: bool | None = None
    tools: bool | None = None
    reasoning: bool | None = None
    """It thinks before answering and takes a reasoning effort, with an output limit that
    covers the thinking (OpenAI's o-series and GPT-5, which take `max_completion_tokens` and
    reject `max_tokens`; Claude's extended thinking; Gemini 2.5's thinking). A model that
    reasons but takes neither (DeepSeek's reasoner) is left unknown here."""
    structured: Structured | None = None
    context_window: int | None = None
    """Input tokens the model accepts."""
    max_output: int | None = None

    def over(self, base: ModelCapabilities) -> ModelCapabilities:
        """`base` with every field this one knows replaced by this one's."""
        known = {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}
        return replace(base, **known) if known else base


UNKNOWN = ModelCapabilities()

_CLAUDE = ModelCapabilities(vision=True, tools=True, reasoning=True, structured=Structured.TOOL)
_OPENAI_REASONING = ModelCapabilities(
    vision=True, tools=True, reasoning=True, structured=Structured.SCHEMA
)
_OPENAI_CHAT = ModelCapabilities(
    vision=True, tools=True, reasoning=False, structured=Structured.SCHEMA
)
_GEMINI = ModelCapabilities(vision=True, tools=True, reasoning=True, structured=Structured.SCHEMA)

BUILT_IN: dict[str, ModelCapabilities] = {
    # https://platform.claude.com/docs/en/about-claude/models/overview
    "claude-*": _CLAUDE,
    "claude-3-5-*": ModelCapabilities(reasoning=False),
    "claude-3-haiku*": ModelCapabilities(reasoning=False),
    "claude-3-opus*": ModelCapabilities(reasoning=False),
    # Structured outputs (`output_config.format`) from Claude 4.5 (and Opus 4.1) on:
    # https://platform.claude.com/docs/en/build-with-claude/structured-outputs
    "claude-*-4-[5-9]*": ModelCapabilities(structured=Structured.SCHEMA),
    "claude-opus-4-1*": ModelCapabilities(structured=Structured.SCHEMA),
    "claude-opus-[5-9]*": ModelCapabilities(structured=Structured.SCHEMA),
    "claude-sonnet-[5-9]*": ModelCapabilities(structured=Structured.SCHEMA),
    "claude-haiku-[5-9]*": ModelCapabilities(structured=Structured.SCHEMA),
    # https://platform.openai.com/docs/models
    "gpt-4o*": _OPENAI_CHAT,
    "gpt-4.1*": _OPENAI_CHAT,
    "gpt-5*": _OPENAI_REASONING,
    "gpt-5*-chat*": ModelCapabilities(reasoning=False),
    "o1*": _OPENAI_REASONING,
    "o1-mini*": ModelCapabilities(vision=False, tools=False, structured=Structured.NONE),
    "o3*": _OPENAI_REASONING,
    "o3-mini*": ModelCapabilities(vision=False),
    "o4-mini*": _OPENAI_REASONING,
    "*codex*": ModelCapabilities(tools=True, reasoning=True, structured=Structured.SCHEMA),
    "*gpt-oss*": ModelCapabilities(vision=False, tools=True),
    # https://ai.google.dev/gemini-api/docs/models
    "gemini-*": _GEMINI,
    "gemini-2.0-*": ModelCapabilities(reasoning=False),
    "gemini-1.5-*": ModelCapabilities(reasoning=False),
    # https://api-docs.deepseek.com/quick_start/pricing
    "deepseek-chat": ModelCapabilities(
        vision=False, tools=True, reasoning=False, structured=Structured.JSON
    ),
    # DeepSeek's reasoner takes `max_tokens` and no effort: its reasoning stays unknown.
    "deepseek-reasoner": ModelCapabilities(vision=False, structured=Structured.JSON),
    "deepseek/deepseek-r1*": ModelCapabilities(vision=False),
    "*qwen*coder*": ModelCapabilities(vision=False, tools=True),
    "*kimi-k2*": ModelCapabilities(vision=False, tools=True),
    "llama3.2-vision*": ModelCapabilities(vision=True),
    "*llava*": ModelCapabilities(vision=True),
}


OUTPUT_LIMITS: dict[str, ModelCapabilities] = {
    # The most output tokens each model writes: what a budget holds for a request that sets
    # no limit of its own. A family's row comes first and its exceptions after it.
    # https://platform.claude.com/docs/en/about-claude/models/overview
    "claude-*": ModelCapabilities(max_output=64_000),
    "claude-opus-4": ModelCapabilities(max_output=32_000),
    "claude-opus-4-[01]*": ModelCapabilities(max_output=32_000),
    "claude-opus-4-2025*": ModelCapabilities(max_output=32_000),
    "claude-3-5-*": ModelCapabilities(max_output=8_192),
    "claude-3-haiku*": ModelCapabilities(max_output=4_096),
    "claude-3-opus*": ModelCapabilities(max_output=4_096),
    # https://platform.openai.com/docs/models
    "gpt-3.5-turbo*": ModelCapabilities(max_output=4_096),
    "gpt-4o*": ModelCapabilities(max_output=16_384),
    "gpt-4.1*": ModelCapabilities(max_output=32_768),
    "gpt-5*": ModelCapabilities(max_output=128_000),
    "gpt-5*-chat*": ModelCapabilities(max_output=16_384),
    "o1*": ModelCapabilities(max_output=100_000),
    "o1-mini*": ModelCapabilities(max_output=65_536),
    "o1-preview*": ModelCapabilities(max_output=32_768),
    "o3*": ModelCapabilities(max_output=100_000),
    "o4-mini*": ModelCapabilities(max_output=100_000),
    "*codex*": ModelCapabilities(max_output=128_000),
    # https://ai.google.dev/gemini-api/docs/models
    "gemini-*": ModelCapabilities(max_output=65_536),
    "gemini-2.0-*": ModelCapabilities(max_output=8_192),
    "gemini-1.5-*": ModelCapabilities(max_output=8_192),
    # https://api-docs.deepseek.com/quick_start/pricing
    "deepseek-chat": ModelCapabilities(max_output=8_192),
    "deepseek-reasoner": ModelCapabilities(max_output=65_536),
}
"""Output limits, applied after `BUILT_IN` (a model's row there names none)."""


def model_capabilities(
    model: str, extra: Mapping[str, ModelCapabilities] | None = None
) -> ModelCapabilities:
    """What `model` can do: every matching built-in row, then every matching `extra` row."""
    found = _built_in(model.lower())
    if extra:
        found = _apply(found, model.lower(), extra.items())
    return found


@lru_cache(maxsize=4096)
def _built_in(name: str) -> ModelCapabilities:
    # Cached: the translation writers ask once per request for the model they write for.
    return _apply(_apply(UNKNOWN, name, BUILT_IN.items()), name, OUTPUT_LIMITS.items())


def _apply(
    found: ModelCapabilities, name: str, rows: Iterable[tuple[str, ModelCapabilities]]
) -> ModelCapabilities:
    for pattern, row in rows:
        if fnmatchcase(name, pattern.lower()):
            found = row.over(found)
    return found
