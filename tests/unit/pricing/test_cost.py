"""Request costs at list price: hand-computed cases to the micro-dollar, and agreement with
the price library's own calculation for any token counts."""

from __future__ import annotations

from datetime import date

import pytest
from genai_prices.types import Usage as PricedUsage
from hypothesis import given, settings
from hypothesis import strategies as st

from rungway.pricing import TokenCounts, rates_for
from rungway.pricing.prices import find_listed_price

ON = date(2026, 12, 1)


@pytest.mark.parametrize(
    ("provider", "model", "tokens", "expected"),
    [
        # $3 input, $0.30 cache read, $3.75 cache write, $15 output per million tokens.
        ("anthropic", "claude-sonnet-4-5", TokenCounts(1000, 500, 200, 300), 0.011685),
        # Past 200k input tokens every token takes the long-context rates: $6 and $22.50.
        ("anthropic", "claude-sonnet-4-5", TokenCounts(250_000, 1000), 1.5225),
        # $0.40 input, $0.10 cached input, $1.60 output per million tokens.
        ("openai", "gpt-4.1-mini", TokenCounts(800, 500, 200, 0), 0.00114),
        ("deepseek", "deepseek-chat", TokenCounts(0, 0), 0.0),
    ],
)
def test_hand_computed_costs(
    provider: str, model: str, tokens: TokenCounts, expected: float
) -> None:
    rates = rates_for(provider, model, on=ON)
    assert rates is not None
    assert rates.cost(tokens) == pytest.approx(expected, abs=1e-9)


def test_models_without_a_token_price_have_no_rates() -> None:
    assert rates_for("copilot", "gpt-4.1", on=ON) is None
    assert rates_for("ollama", "llama3.2", on=ON) is None
    assert rates_for("openai", "no-such-model-anywhere", on=ON) is None


counts = st.integers(0, 400_000)


@settings(deadline=None)
@given(
    st.sampled_from(
        [
            ("anthropic", "claude-sonnet-4-5"),
            ("anthropic", "claude-haiku-4-5"),
            ("openai", "gpt-4.1-mini"),
            ("openai", "gpt-4o"),
            ("deepseek", "deepseek-chat"),
            ("groq", "llama-3.3-70b-versatile"),
        ]
    ),
    counts,
    counts,
    counts,
    counts,
)
def test_costs_agree_with_the_price_librarys_own_calculation(
    model: tuple[str, str], fresh: int, output: int, cache_read: int, cache_write: int
) -> None:
    provider, name = model
    listed = find_listed_price(provider, name, ON)
    rates = rates_for(provider, name, on=ON)
    assert listed is not None
    assert rates is not None
    if listed.cache_read_mtok is None:
        cache_read = 0  # the library counts unpriced cache reads as input; so does rungway
    if listed.cache_write_mtok is None:
        cache_write = 0
    expected = listed.calc_price(
        PricedUsage(
            input_tokens=fresh + cache_read + cache_write,
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
            output_tokens=output,
        )
    )["total_price"]
    ours = rates.cost(TokenCounts(fresh, output, cache_read, cache_write))
    assert ours == pytest.approx(float(expected), rel=1e-9, abs=1e-12)


def test_the_ceiling_bounds_every_cost_of_the_same_size() -> None:
    rates = rates_for("anthropic", "claude-sonnet-4-5", on=ON)
    assert rates is not None
    ceiling = rates.ceiling(10_000, 2_000)
    for split in (TokenCounts(10_000, 2_000), TokenCounts(0, 2_000, 0, 10_000)):
        assert rates.cost(split) <= ceiling
