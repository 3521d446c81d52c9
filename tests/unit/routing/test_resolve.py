"""Model names resolve to the connections that may serve them, in config order."""

from __future__ import annotations

import pytest

from rungway.routing.autoid import AutoSpec, BadAutoId, Category, Ladder
from rungway.routing.resolve import ConnectionFacts, ModelTable, Target, UnknownModel

TABLE = ModelTable(
    [
        ConnectionFacts("plan", "anthropic", frozenset({"claude-sonnet-4-5", "claude-haiku-4-5"})),
        ConnectionFacts("api", "anthropic", frozenset({"claude-sonnet-4-5"})),
        ConnectionFacts("cheap", "deepseek", frozenset({"deepseek-chat"})),
        ConnectionFacts("router", "openrouter", frozenset({"deepseek/deepseek-chat"})),
    ],
    {
        "sonnet": "claude-sonnet-4-5",
        "claude-haiku-*": "claude-haiku-4-5",
        "smart": "auto/thrifty",
    },
)


def test_bare_name_goes_to_every_connection_that_serves_it_in_config_order() -> None:
    resolution = TABLE.resolve("claude-sonnet-4-5")
    assert resolution.targets == (
        Target("plan", "claude-sonnet-4-5"),
        Target("api", "claude-sonnet-4-5"),
    )


def test_connection_prefix_pins_one_connection_and_strips_the_prefix() -> None:
    resolution = TABLE.resolve("api/claude-sonnet-4-5")
    assert resolution.targets == (Target("api", "claude-sonnet-4-5"),)


def test_provider_prefix_keeps_that_providers_connections_only() -> None:
    assert [t.connection_id for t in TABLE.resolve("anthropic/claude-sonnet-4-5").targets] == [
        "plan",
        "api",
    ]


def test_a_served_name_containing_a_slash_wins_over_prefix_reading() -> None:
    # OpenRouter serves "deepseek/deepseek-chat" under that very name, so the name is not
    # read as provider "deepseek" + model "deepseek-chat".
    assert TABLE.resolve("deepseek/deepseek-chat").targets == (
        Target("router", "deepseek/deepseek-chat"),
    )
    assert TABLE.resolve("cheap/deepseek-chat").targets == (Target("cheap", "deepseek-chat"),)


def test_aliases_exact_and_glob() -> None:
    assert TABLE.resolve("sonnet").resolved == "claude-sonnet-4-5"
    resolution = TABLE.resolve("claude-haiku-4-5-20251001")
    assert resolution.requested == "claude-haiku-4-5-20251001"
    assert resolution.targets == (Target("plan", "claude-haiku-4-5"),)


def test_unknown_model_lists_what_is_available() -> None:
    with pytest.raises(UnknownModel, match=r"'gpt-9' is not served.*claude-sonnet-4-5"):
        TABLE.resolve("gpt-9")


def test_connection_that_does_not_serve_the_model_says_what_it_serves() -> None:
    with pytest.raises(UnknownModel, match=r"'api' does not serve 'claude-haiku-4-5'"):
        TABLE.resolve("api/claude-haiku-4-5")


def test_auto_ids_and_aliases_to_them_go_to_the_ladder() -> None:
    resolution = TABLE.resolve("smart")
    assert resolution.auto == AutoSpec(Ladder.THRIFTY, None)
    assert resolution.targets == ()
    assert TABLE.resolve("auto/coding:subscription").auto == AutoSpec(
        Ladder.SUBSCRIPTION, Category.CODING
    )


def test_a_malformed_auto_id_says_what_is_valid() -> None:
    with pytest.raises(BadAutoId, match="auto/<category>:<tier>"):
        TABLE.resolve("auto/fastest")


def test_model_listing_includes_aliases_but_not_patterns() -> None:
    names = [name for name, _ in TABLE.models()]
    assert "sonnet" in names
    assert "claude-haiku-*" not in names
    assert names.count("claude-sonnet-4-5") == 1
    assert {"auto", "auto/subscription", "auto/thrifty", "auto/coding:subscription"} <= set(names)
