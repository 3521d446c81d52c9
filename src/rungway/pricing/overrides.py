"""Prices the operator sets in config (`prices:`), over the bundled list prices.

A model the bundled table does not price (a custom endpoint's model, a new release) would
cost $0 to a budget: its hold and its settled cost would both be nothing. A `prices:` entry
gives it a price, and that price is used everywhere a list price is: the tier, a hold's
ceiling, the settled cost and the list-price cost.

Keys are case-insensitive globs on the model name, as in `tiers.models`: a key whose part
before the first `/` names a rungway provider (`deepseek/my-model-*`) matches that
provider's models only and wins over bare globs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date
from decimal import Decimal
from fnmatch import fnmatchcase
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from rungway.pricing.cost import Rate, Rates, rates_for
from rungway.pricing.prices import KNOWN_PROVIDERS, ModelPrice, list_price

__all__ = ["PriceBook", "PriceOverride", "matching_key"]

PerMtok = Annotated[Decimal, Field(ge=0)]


class PriceOverride(BaseModel):
    """One model's price in US dollars per million tokens; cache rates default to input's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_per_mtok: PerMtok
    output_per_mtok: PerMtok
    cache_read_per_mtok: PerMtok | None = None
    cache_write_per_mtok: PerMtok | None = None


class PriceBook:
    """Prices and rates of a (provider, model): the config's `prices:` first, then the list."""

    def __init__(self, overrides: Mapping[str, PriceOverride] | None = None) -> None:
        self._overrides = dict(overrides or {})
        # Keyed by (provider, model): routes name configured models only, so this stays small.
        self._matched: dict[tuple[str, str], tuple[str, PriceOverride] | None] = {}

    def price(self, provider: str, model: str, *, on: date | None = None) -> ModelPrice | None:
        """The model's price per million tokens, or None when neither source has one."""
        found = self._override(provider, model)
        if found is None:
            return list_price(provider, model, on=on)
        key, override = found
        return ModelPrice(
            input_per_mtok=override.input_per_mtok,
            output_per_mtok=override.output_per_mtok,
            cache_read_per_mtok=override.cache_read_per_mtok,
            cache_write_per_mtok=override.cache_write_per_mtok,
            source=f"config prices[{key!r}]",
        )

    def rates(self, provider: str, model: str) -> Rates | None:
        """The rates a request's tokens are priced at, or None when the model has no price."""
        found = self._override(provider, model)
        if found is None:
            return rates_for(provider, model)
        override = found[1]
        input_rate: Rate = (float(override.input_per_mtok), ())
        return Rates(
            input=input_rate,
            output=(float(override.output_per_mtok), ()),
            cache_read=_rate_or(override.cache_read_per_mtok, input_rate),
            cache_write=_rate_or(override.cache_write_per_mtok, input_rate),
        )

    def _override(self, provider: str, model: str) -> tuple[str, PriceOverride] | None:
        if not self._overrides:
            return None
        name = (provider, model)
        if name not in self._matched:
            key = matching_key(provider, model, self._overrides)
            self._matched[name] = None if key is None else (key, self._overrides[key])
        return self._matched[name]


def matching_key(provider: str, model: str, keys: Iterable[str]) -> str | None:
    """The first key matching `model` at `provider`: a `provider/glob` key before a bare one."""
    name = model.lower()
    bare: list[str] = []
    for key in keys:
        prefix, slash, glob = key.partition("/")
        if slash and prefix.lower() in KNOWN_PROVIDERS:
            if prefix.lower() == provider.lower() and fnmatchcase(name, glob.lower()):
                return key
        else:
            bare.append(key)
    return next((key for key in bare if fnmatchcase(name, key.lower())), None)


def _rate_or(rate: Decimal | None, missing: Rate) -> Rate:
    return missing if rate is None else (float(rate), ())
