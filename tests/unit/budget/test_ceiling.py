"""The hold's output figure: the request's own limit, else its model's, else the default;
and the output that fits what is left of a budget."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from rungway.budget.ceiling import (
    DEFAULT_OUTPUT_CEILING,
    cost_ceiling,
    output_limit,
    output_that_fits,
    requested_output_limit,
)
from rungway.models.capabilities import model_capabilities
from rungway.pricing import rates_for


def test_a_request_without_a_limit_holds_its_models_own_limit() -> None:
    assert output_limit({}, 8_192) == 8_192
    assert output_limit({}, None) == DEFAULT_OUTPUT_CEILING
    assert output_limit({"max_tokens": 100}, 8_192) == 100
    assert model_capabilities("deepseek-chat").max_output == 8_192
    assert model_capabilities("claude-3-5-haiku-latest").max_output == 8_192
    assert model_capabilities("claude-opus-4-1-20250805").max_output == 32_000
    assert model_capabilities("gpt-5-mini").max_output == 128_000
    assert model_capabilities("mystery-7b").max_output is None


def test_a_gemini_body_names_its_limit_inside_its_generation_config() -> None:
    assert requested_output_limit({"generationConfig": {"maxOutputTokens": 300}}) == 300
    assert requested_output_limit({"generation_config": {"max_output_tokens": 30}}) == 30
    assert requested_output_limit({"max_tokens": True}) is None


@given(
    body_bytes=st.integers(0, 2_000_000),
    available=st.floats(0, 5, allow_nan=False),
    model=st.sampled_from(["deepseek-chat", "gpt-4.1-mini", "claude-haiku-4-5"]),
)
# The division lands on a whole token that the ceiling then holds exactly.
@example(body_bytes=29277, available=1.0, model="gpt-4.1-mini")
def test_the_output_that_fits_is_the_most_whose_ceiling_stays_within_what_is_left(
    body_bytes: int, available: float, model: str
) -> None:
    provider = "anthropic" if model.startswith("claude") else "openai"
    provider = "deepseek" if model.startswith("deepseek") else provider
    rates = rates_for(provider, model)
    assert rates is not None
    fits = output_that_fits(provider, model, body_bytes, available)
    assert fits is not None
    if fits:
        body = {"max_tokens": fits}
        assert cost_ceiling(provider, model, body, body_bytes) <= available
    assert cost_ceiling(provider, model, {"max_tokens": fits + 1}, body_bytes) > available
