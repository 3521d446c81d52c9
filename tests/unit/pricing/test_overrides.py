"""`prices:` in config: a price for a model the list does not price, used everywhere."""

from __future__ import annotations

from decimal import Decimal

import pytest

from rungway.config import ConfigError, parse_settings
from rungway.pricing import PriceBook, PriceOverride, Tier, TierSettings, TokenCounts, classify_tier
from rungway.pricing.cost import rates_for

HOUSE = PriceOverride(input_per_mtok=Decimal("0.5"), output_per_mtok=Decimal(2))


def test_an_unlisted_model_gets_its_configured_price_and_rates() -> None:
    assert PriceBook().price("openai-compatible", "house-coder-1") is None
    book = PriceBook({"house-*": HOUSE})
    price = book.price("openai-compatible", "house-coder-1")
    assert price is not None
    assert (price.input_per_mtok, price.output_per_mtok) == (Decimal("0.5"), Decimal(2))
    assert price.source == "config prices['house-*']"
    rates = book.rates("openai-compatible", "house-coder-1")
    assert rates is not None
    # Cache reads and writes default to the input rate.
    tokens = TokenCounts(1_000_000, 1_000_000, cache_read_tokens=2_000_000)
    assert rates.cost(tokens) == pytest.approx(0.5 + 2 + 1.0)
    assert rates.ceiling(1_000_000, 1_000_000) == pytest.approx(2.5)


def test_a_provider_key_wins_over_a_bare_glob_and_matches_that_provider_only() -> None:
    dear = PriceOverride(input_per_mtok=Decimal(9), output_per_mtok=Decimal(9))
    book = PriceBook({"house-*": HOUSE, "ollama/house-*": dear})
    ollama = book.price("ollama", "House-Coder-1")
    other = book.price("groq", "house-coder-1")
    assert ollama is not None
    assert other is not None
    assert (ollama.input_per_mtok, other.input_per_mtok) == (Decimal(9), Decimal("0.5"))


def test_a_listed_model_keeps_its_list_price_unless_overridden() -> None:
    book = PriceBook({"house-*": HOUSE})
    assert book.rates("anthropic", "claude-sonnet-4-5") == rates_for(
        "anthropic", "claude-sonnet-4-5"
    )
    overridden = PriceBook({"anthropic/claude-sonnet-*": HOUSE}).price(
        "anthropic", "claude-sonnet-4-5"
    )
    assert overridden is not None
    assert overridden.input_per_mtok == Decimal("0.5")


def test_the_tier_follows_the_configured_price() -> None:
    settings = TierSettings()
    unpriced = classify_tier("openai-compatible", "house-coder-1", settings)
    assert (unpriced.tier, unpriced.price) == (Tier.PREMIUM, None)
    book = PriceBook({"house-*": HOUSE})
    priced = classify_tier("openai-compatible", "house-coder-1", settings, prices=book)
    assert priced.tier is Tier.CHEAP
    assert priced.reason == "input $0.5/M ≤ $1/M: cheap"


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"input_per_mtok": -1, "output_per_mtok": 1}, "greater than or equal to 0"),
        ({"input_per_mtok": 1}, "output_per_mtok"),
        ({"input_per_mtok": 1, "output_per_mtok": 1, "per_request": 1}, "Extra inputs"),
    ],
)
def test_config_validates_each_price(entry: dict[str, object], problem: str) -> None:
    connection = {"id": "local", "provider": "ollama", "auth": "none", "models": ["m"]}
    with pytest.raises(ConfigError, match=problem):
        parse_settings({"connections": [connection], "prices": {"house-*": entry}})
    loaded = parse_settings(
        {
            "connections": [connection],
            "prices": {"house-*": {"input_per_mtok": 1, "output_per_mtok": 3}},
        }
    )
    assert loaded.prices["house-*"].output_per_mtok == 3
