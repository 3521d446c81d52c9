"""Tiers of a (provider, model): free, cheap or premium, from list prices and config overrides."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from rungway.pricing.overrides import PriceBook, matching_key
from rungway.pricing.prices import ModelPrice, list_price

__all__ = ["Tier", "TierSettings", "TierVerdict", "classify_tier"]


class Tier(StrEnum):
    """How dear a model is to call on metered credit."""

    FREE = "free"
    CHEAP = "cheap"
    PREMIUM = "premium"


class TierSettings(BaseModel):
    """Operator settings for tiering: the cheap threshold and per-provider or per-model overrides.

    `models` keys are case-insensitive globs on the model name. A key whose part before the first
    `/` names a rungway provider (`anthropic/claude-*`) matches that provider's models only and
    wins over bare globs; any other key is a bare glob on the whole model name, so router names
    such as `meta-llama/*` work as written, and `openrouter/openai/*` pins a router's vendor
    prefix to the router.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    cheap_max_input_per_mtok: Annotated[Decimal, Field(ge=0)] = Decimal("1")
    """A model whose input price per million tokens is at most this is cheap."""
    providers: dict[str, Tier] = {}
    """Tier for every model of a provider; checked before anything else."""
    models: dict[str, Tier] = {}
    """Tier by model-name glob, optionally `provider/glob`; the first match in order wins."""


@dataclass(frozen=True, slots=True)
class TierVerdict:
    """A tier, the list price it was read from (if any), and why, for `explain` to show."""

    tier: Tier
    price: ModelPrice | None
    reason: str


def classify_tier(
    provider: str,
    model: str,
    settings: TierSettings,
    *,
    on: date | None = None,
    prices: PriceBook | None = None,
) -> TierVerdict:
    """Return the tier of `model` at `provider`: overrides, then `:free`, then its price (the
    config's `prices:` entry when `prices` has one, else its list price)."""
    # The price is looked up (memoised) even when an override decides, so that `explain`
    # can show what the override replaced.
    price = (
        list_price(provider, model, on=on)
        if prices is None
        else prices.price(provider, model, on=on)
    )
    if (tier := settings.providers.get(provider)) is not None:
        return TierVerdict(tier, price, f"override providers[{provider!r}]")
    if (key := matching_key(provider, model, settings.models)) is not None:
        return TierVerdict(settings.models[key], price, f"override models[{key!r}]")
    if model.lower().endswith(":free"):
        return TierVerdict(Tier.FREE, price, "':free' variant: free")
    if price is None:
        return TierVerdict(Tier.PREMIUM, None, "no list price known: premium")
    if price.is_zero:
        return TierVerdict(Tier.FREE, price, "input and output $0/M: free")
    rates = f"input {_per_mtok(price.input_per_mtok)}"
    cheap_max = _per_mtok(settings.cheap_max_input_per_mtok)
    if price.input_per_mtok <= settings.cheap_max_input_per_mtok:
        return TierVerdict(Tier.CHEAP, price, f"{rates} ≤ {cheap_max}: cheap")
    return TierVerdict(Tier.PREMIUM, price, f"{rates} > {cheap_max}: premium")


def _per_mtok(dollars: Decimal) -> str:
    # normalize() drops trailing zeros; the `f` format keeps 10 from printing as 1E+1.
    return f"${dollars.normalize():f}/M"
