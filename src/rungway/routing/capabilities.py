"""Which categories a model serves, from a small curated table that config can extend.

Patterns are globs on the model name, matched case-insensitively; every matching row adds
its categories. A model no row matches serves `chat` only.
"""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase

from rungway.routing.autoid import Category

_C, _R, _V, _T = Category.CODING, Category.REASONING, Category.VISION, Category.CHAT

BUILT_IN: dict[str, frozenset[Category]] = {
    "claude-opus-*": frozenset({_C, _R, _V, _T}),
    "claude-sonnet-*": frozenset({_C, _R, _V, _T}),
    "claude-haiku-*": frozenset({_C, _V, _T}),
    "claude-3-5-*": frozenset({_C, _V, _T}),
    "gpt-5*": frozenset({_C, _R, _V, _T}),
    "gpt-4.1*": frozenset({_C, _V, _T}),
    "gpt-4o*": frozenset({_C, _V, _T}),
    "o1*": frozenset({_C, _R, _T}),
    "o3*": frozenset({_C, _R, _V, _T}),
    "o4-mini*": frozenset({_C, _R, _V, _T}),
    "*codex*": frozenset({_C, _R, _T}),
    "gemini-2.5-*": frozenset({_C, _R, _V, _T}),
    "gemini-3*": frozenset({_C, _R, _V, _T}),
    "deepseek-chat": frozenset({_C, _T}),
    "deepseek-reasoner": frozenset({_C, _R, _T}),
    "deepseek/deepseek-r1*": frozenset({_C, _R, _T}),
    "*qwen*coder*": frozenset({_C, _T}),
    "*kimi-k2*": frozenset({_C, _T}),
    "*gpt-oss*": frozenset({_C, _R, _T}),
    "llama3.2-vision*": frozenset({_V, _T}),
    "*llava*": frozenset({_V, _T}),
}


def model_categories(
    model: str, extra: Mapping[str, frozenset[Category]] | None = None
) -> frozenset[Category]:
    """The categories `model` serves: every matching built-in and configured row, or chat."""
    name = model.lower()
    found: set[Category] = set()
    for table in (BUILT_IN, extra or {}):
        for pattern, categories in table.items():
            if fnmatchcase(name, pattern.lower()):
                found |= categories
    return frozenset(found) if found else frozenset({Category.CHAT})
