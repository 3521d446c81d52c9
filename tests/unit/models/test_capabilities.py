"""What each model can do: the curated table, the config rows over it, and the roster's
context window from genai-prices."""

from __future__ import annotations

import pytest
import yaml

from rungway.app import build_roster
from rungway.config import ConfigError, capability_rows, category_rows, parse_settings
from rungway.models.capabilities import (
    BUILT_IN,
    UNKNOWN,
    ModelCapabilities,
    Structured,
    model_capabilities,
)
from rungway.routing.autoid import Category


@pytest.mark.parametrize(
    ("model", "reasoning", "structured"),
    [
        ("o3", True, Structured.SCHEMA),
        ("gpt-5-mini", True, Structured.SCHEMA),
        ("gpt-5-chat-latest", False, Structured.SCHEMA),
        ("gpt-4o-mini", False, Structured.SCHEMA),
        ("claude-sonnet-4-5-20250929", True, Structured.SCHEMA),
        ("claude-opus-4-1", True, Structured.SCHEMA),
        ("claude-haiku-4-5", True, Structured.SCHEMA),
        ("claude-sonnet-4-20250514", True, Structured.TOOL),
        ("claude-3-7-sonnet-latest", True, Structured.TOOL),
        ("claude-3-5-haiku-latest", False, Structured.TOOL),
        ("gemini-2.5-flash", True, Structured.SCHEMA),
        ("gemini-2.0-flash", False, Structured.SCHEMA),
        ("deepseek-chat", False, Structured.JSON),
        ("deepseek-reasoner", None, Structured.JSON),  # takes max_tokens, no effort
        ("house-model", None, None),
    ],
)
def test_curated_rows_say_who_reasons_and_takes_a_schema(
    model: str, reasoning: bool | None, structured: Structured | None
) -> None:
    found = model_capabilities(model)
    assert (found.reasoning, found.structured) == (reasoning, structured)


def test_vision_and_tools_where_the_table_knows_them() -> None:
    assert model_capabilities("o1-mini") == ModelCapabilities(
        vision=False, tools=False, reasoning=True, structured=Structured.NONE, max_output=65_536
    )
    assert model_capabilities("deepseek-chat").vision is False
    assert model_capabilities("llama3.2-vision:11b").vision is True
    assert model_capabilities("mystery-7b") is UNKNOWN


def test_later_rows_fill_over_earlier_ones_and_keep_what_they_leave_out() -> None:
    assert ModelCapabilities(vision=False).over(BUILT_IN["claude-*"]) == ModelCapabilities(
        vision=False, tools=True, reasoning=True, structured=Structured.TOOL
    )
    extra = {"claude-3-5-*": ModelCapabilities(structured=Structured.NONE, context_window=90)}
    found = model_capabilities("Claude-3-5-Haiku-Latest", extra)
    assert (found.vision, found.structured, found.context_window) == (True, Structured.NONE, 90)


CONFIG = """
connections:
  - id: key
    provider: openai
    auth: none
    models: [gpt-4o, my-coder-1, my-reader-1]
capabilities:
  "my-coder-*": [coding, chat]
  "my-reader-*":
    categories: [vision]
    vision: true
    tools: false
    structured_output: json
    context_window: 32000
  "gpt-4o*":
    context_window: 1000
"""


def test_config_rows_take_the_short_and_the_long_form() -> None:
    settings = parse_settings(yaml.safe_load(CONFIG), source="rungway.yaml")
    assert category_rows(settings) == {
        "my-coder-*": {Category.CODING, Category.CHAT},
        "my-reader-*": {Category.VISION},
        "gpt-4o*": frozenset(),
    }
    assert capability_rows(settings)["my-reader-*"] == ModelCapabilities(
        vision=True, tools=False, structured=Structured.JSON, context_window=32_000
    )


def test_the_roster_takes_the_context_window_from_genai_prices_unless_config_says() -> None:
    document = yaml.safe_load(CONFIG)
    del document["capabilities"]["gpt-4o*"]
    roster = build_roster(parse_settings(document, source="rungway.yaml"))
    served = {s.model: s for s in roster.connections["key"].models}
    assert served["gpt-4o"].capabilities.context_window == 128_000  # genai-prices
    assert served["my-coder-1"].capabilities == UNKNOWN
    assert served["my-reader-1"].capabilities.tools is False
    overridden = build_roster(parse_settings(yaml.safe_load(CONFIG), source="rungway.yaml"))
    (gpt,) = [s for s in overridden.connections["key"].models if s.model == "gpt-4o"]
    assert gpt.capabilities.context_window == 1000


def test_a_bad_capability_row_is_named() -> None:
    document = yaml.safe_load(CONFIG)
    document["capabilities"]["my-reader-*"]["structured_output"] = "xml"
    with pytest.raises(ConfigError, match="capabilities"):
        parse_settings(document, source="rungway.yaml")
