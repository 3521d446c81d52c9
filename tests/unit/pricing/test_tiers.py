"""Tiers follow overrides first, then `:free`, then the list price against the cheap threshold."""

from __future__ import annotations

from decimal import Decimal

import pydantic
import pytest

from rungway.pricing import Tier, TierSettings, TierVerdict, classify_tier, list_price

DEFAULTS = TierSettings()


@pytest.mark.parametrize(
    ("provider", "model", "tier", "input_rate", "reason"),
    [
        ("anthropic", "claude-sonnet-4-5", Tier.PREMIUM, "3", "input $3/M > $1/M: premium"),
        # Exactly on the default threshold: the bound is inclusive.
        ("anthropic", "claude-haiku-4-5", Tier.CHEAP, "1", "input $1/M ≤ $1/M: cheap"),
        ("openai", "gpt-4o", Tier.PREMIUM, "2.5", "input $2.5/M > $1/M: premium"),
        ("openai", "gpt-4o-mini", Tier.CHEAP, "0.15", "input $0.15/M ≤ $1/M: cheap"),
        ("deepseek", "deepseek-chat", Tier.CHEAP, "0.27", "input $0.27/M ≤ $1/M: cheap"),
        (
            "anthropic",
            "claude-sonnet-4-5-20250929",
            Tier.PREMIUM,
            "3",
            "input $3/M > $1/M: premium",
        ),
        ("gemini", "gemma-3", Tier.FREE, "0", "input and output $0/M: free"),
    ],
)
def test_list_price_decides_the_tier(
    provider: str, model: str, tier: Tier, input_rate: str, reason: str
) -> None:
    verdict = classify_tier(provider, model, DEFAULTS)
    assert verdict.tier is tier
    assert verdict.price is not None
    assert verdict.price.input_per_mtok == Decimal(input_rate)
    assert verdict.reason == reason


def test_openrouter_free_variant_is_free() -> None:
    verdict = classify_tier("openrouter", "meta-llama/llama-3.3-70b-instruct:free", DEFAULTS)
    assert verdict.tier is Tier.FREE
    assert verdict.reason == "':free' variant: free"


def test_free_suffix_counts_even_without_a_list_price() -> None:
    verdict = classify_tier("openai-compatible", "some-lab/new-model:FREE", DEFAULTS)
    assert verdict == TierVerdict(Tier.FREE, None, "':free' variant: free")


def test_unknown_model_is_premium() -> None:
    verdict = classify_tier("openai", "no-such-model-anywhere", DEFAULTS)
    assert verdict == TierVerdict(Tier.PREMIUM, None, "no list price known: premium")


def test_threshold_is_configurable() -> None:
    strict = TierSettings(cheap_max_input_per_mtok=Decimal("0.5"))
    lenient = TierSettings(cheap_max_input_per_mtok=Decimal("2.5"))
    assert classify_tier("anthropic", "claude-haiku-4-5", strict).tier is Tier.PREMIUM
    assert classify_tier("anthropic", "claude-haiku-4-5", strict).reason == (
        "input $1/M > $0.5/M: premium"
    )
    assert classify_tier("openai", "gpt-4o", lenient).tier is Tier.CHEAP
    assert classify_tier("openai", "gpt-4o", lenient).reason == "input $2.5/M ≤ $2.5/M: cheap"


def test_provider_override_comes_first() -> None:
    settings = TierSettings(providers={"anthropic": Tier.CHEAP}, models={"claude-*": Tier.PREMIUM})
    verdict = classify_tier("anthropic", "claude-sonnet-4-5", settings)
    assert verdict.tier is Tier.CHEAP
    assert verdict.reason == "override providers['anthropic']"
    # The list price still rides along for `explain`.
    assert verdict.price == list_price("anthropic", "claude-sonnet-4-5")


def test_provider_override_beats_free_suffix() -> None:
    settings = TierSettings(providers={"openrouter": Tier.PREMIUM})
    verdict = classify_tier("openrouter", "meta-llama/llama-3.3-70b-instruct:free", settings)
    assert verdict.tier is Tier.PREMIUM


def test_bare_model_glob_is_case_insensitive() -> None:
    settings = TierSettings(models={"GPT-4O*": Tier.CHEAP})
    verdict = classify_tier("openai", "gpt-4o-2024-08-06", settings)
    assert verdict.tier is Tier.CHEAP
    assert verdict.reason == "override models['GPT-4O*']"


def test_provider_qualified_glob_wins_over_an_earlier_bare_glob() -> None:
    settings = TierSettings(models={"gpt-4o*": Tier.CHEAP, "openai/gpt-4o": Tier.FREE})
    assert classify_tier("openai", "gpt-4o", settings).reason == "override models['openai/gpt-4o']"
    assert classify_tier("openai", "gpt-4o", settings).tier is Tier.FREE
    # The qualified key is for openai only; a compatible endpoint gets the bare glob.
    assert classify_tier("openai-compatible", "gpt-4o", settings).tier is Tier.CHEAP


def test_first_matching_glob_in_order_wins() -> None:
    settings = TierSettings(models={"claude-haiku-*": Tier.FREE, "claude-*": Tier.PREMIUM})
    assert classify_tier("anthropic", "claude-haiku-4-5", settings).tier is Tier.FREE
    assert classify_tier("anthropic", "claude-sonnet-4-5", settings).tier is Tier.PREMIUM
    reordered = TierSettings(models={"claude-*": Tier.PREMIUM, "claude-haiku-*": Tier.FREE})
    assert classify_tier("anthropic", "claude-haiku-4-5", reordered).tier is Tier.PREMIUM


def test_model_override_beats_free_suffix_and_price() -> None:
    settings = TierSettings(models={"*:free": Tier.CHEAP, "deepseek-chat": Tier.PREMIUM})
    verdict = classify_tier("openrouter", "meta-llama/llama-3.3-70b-instruct:free", settings)
    assert verdict.tier is Tier.CHEAP
    assert classify_tier("deepseek", "deepseek-chat", settings).tier is Tier.PREMIUM


def test_router_vendor_prefix_is_a_bare_glob_unless_it_names_a_provider() -> None:
    settings = TierSettings(
        models={
            "meta-llama/*": Tier.FREE,
            "openrouter/openai/*": Tier.FREE,
            "openai/*": Tier.CHEAP,
        }
    )
    llama = classify_tier("openrouter", "meta-llama/llama-3.3-70b-instruct", settings)
    assert llama.reason == "override models['meta-llama/*']"
    routed = classify_tier("openrouter", "openai/gpt-4o", settings)
    assert routed.reason == "override models['openrouter/openai/*']"
    direct = classify_tier("openai", "gpt-4o", settings)
    assert direct.reason == "override models['openai/*']"
    # `openai/*` names the openai provider, so another provider's `openai/` model is untouched.
    hosted = classify_tier("groq", "openai/gpt-oss-120b", settings)
    assert hosted.reason == "input $0.15/M ≤ $1/M: cheap"


def test_memoised_prices_do_not_freeze_the_tier() -> None:
    # The price lookup is cached; the settings are read afresh on every call.
    first = classify_tier("openai", "gpt-4o-mini", DEFAULTS)
    overridden = classify_tier(
        "openai", "gpt-4o-mini", TierSettings(models={"gpt-4o-mini": Tier.PREMIUM})
    )
    lowered = classify_tier(
        "openai", "gpt-4o-mini", TierSettings(cheap_max_input_per_mtok=Decimal("0.1"))
    )
    again = classify_tier("openai", "gpt-4o-mini", DEFAULTS)
    assert [first.tier, overridden.tier, lowered.tier, again.tier] == [
        Tier.CHEAP,
        Tier.PREMIUM,
        Tier.PREMIUM,
        Tier.CHEAP,
    ]
    assert first.price is overridden.price is lowered.price is again.price


def test_settings_are_frozen_and_strict() -> None:
    with pytest.raises(pydantic.ValidationError):
        TierSettings.model_validate({"cheap_max": "1"})
    with pytest.raises(pydantic.ValidationError):
        TierSettings.model_validate({"models": {"gpt-*": "expensive"}})
    with pytest.raises(pydantic.ValidationError):
        TierSettings(cheap_max_input_per_mtok=Decimal("-1"))
    with pytest.raises(pydantic.ValidationError):
        DEFAULTS.cheap_max_input_per_mtok = Decimal("2")


def test_settings_parse_from_config_strings() -> None:
    settings = TierSettings.model_validate(
        {"cheap_max_input_per_mtok": "0.3", "providers": {"ollama": "free"}}
    )
    assert settings.cheap_max_input_per_mtok == Decimal("0.3")
    assert classify_tier("ollama", "llama3.1:8b", settings) == TierVerdict(
        Tier.FREE, None, "override providers['ollama']"
    )
