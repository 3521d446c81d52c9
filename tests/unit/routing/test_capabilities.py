"""Which categories a model serves: curated globs, extended by config, `chat` by default."""

from __future__ import annotations

import pytest

from rungway.routing.autoid import Category
from rungway.routing.capabilities import BUILT_IN, model_categories

ALL = frozenset(Category)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("claude-sonnet-4-5", ALL),
        ("claude-haiku-4-5", {Category.CODING, Category.VISION, Category.CHAT}),
        ("gpt-5-codex", ALL),
        ("o1-mini", {Category.CODING, Category.REASONING, Category.CHAT}),
        ("deepseek-chat", {Category.CODING, Category.CHAT}),
        ("deepseek-reasoner", {Category.CODING, Category.REASONING, Category.CHAT}),
        ("qwen2.5-coder:32b", {Category.CODING, Category.CHAT}),
        ("llama3.2-vision:11b", {Category.VISION, Category.CHAT}),
    ],
)
def test_curated_models_serve_their_categories(model: str, expected: frozenset[Category]) -> None:
    assert model_categories(model) == expected


def test_matching_rows_add_up() -> None:
    # "gpt-5-codex" matches both `gpt-5*` and `*codex*`; the union is kept.
    assert model_categories("gpt-5-codex") >= BUILT_IN["*codex*"] | BUILT_IN["gpt-5*"]


def test_patterns_match_case_insensitively() -> None:
    assert model_categories("Claude-Opus-4-1") == ALL


def test_a_model_nothing_matches_serves_chat_only() -> None:
    assert model_categories("mystery-7b") == {Category.CHAT}


def test_config_rows_extend_the_curated_table() -> None:
    extra = {
        "mystery-*": frozenset({Category.CODING}),
        "claude-haiku-*": frozenset({Category.REASONING}),
    }
    assert model_categories("mystery-7b", extra) == {Category.CODING}
    assert Category.REASONING in model_categories("claude-haiku-4-5", extra)
    assert Category.CODING in model_categories("claude-haiku-4-5", extra)
