"""List prices per million tokens for a (provider, model), read from genai-prices' bundled data.

Lookups never touch the network: they read a snapshot built here from the price table that
ships inside the genai-prices wheel, never the library's process-wide "current" snapshot, which
its optional background updater would replace with fetched data. Nothing here starts that
updater.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from functools import cache, lru_cache
from typing import Final

from genai_prices.data_snapshot import DataSnapshot
from genai_prices.types import ModelInfo, StartDateConstraint, TieredPrices, TimeOfDateConstraint
from genai_prices.types import ModelPrice as ListedPrice

__all__ = [
    "KNOWN_PROVIDERS",
    "PRICE_SOURCE",
    "ModelPrice",
    "find_listed_price",
    "genai_prices_provider",
    "list_price",
]

PRICE_SOURCE: Final = "genai-prices"
"""`ModelPrice.source` of every price read from the bundled genai-prices table."""

# Our provider name -> the genai-prices provider id that lists its prices. A provider missing
# from this table and from _UNPRICED (the `*-compatible` endpoints, anything unknown) is matched
# by model name alone, with genai-prices' own model-to-provider matching.
_PRICE_PROVIDER: Final[Mapping[str, str]] = {
    "anthropic": "anthropic",
    "openai": "openai",
    "openai-responses": "openai",
    "codex": "openai",  # the ChatGPT backend serves OpenAI's models at OpenAI's list prices
    "deepseek": "deepseek",
    "gemini": "google",
    # A Code Assist plan serves Google's models; their list price is what the plan saved.
    "gemini-code-assist": "google",
    # The GLM Coding Plan serves Z.ai's models; their list price is what the plan saved.
    "glm-coding": "zai",
    "glm-coding-anthropic": "zai",
    "groq": "groq",
    # The coding plans serve their vendors' models; the list price is what the plan saved.
    "kimi-code": "moonshotai",
    "kimi-code-openai": "moonshotai",
    "minimax-token-plan": "minimax",
    "openrouter": "openrouter",
}

# Providers whose models have no per-token list price: copilot is billed by plan (the billing
# catalog covers its overage), ollama runs models locally.
_UNPRICED: Final = frozenset({"copilot", "ollama"})

# Antigravity serves Google's, Anthropic's and OpenAI's models: each is priced by its name.
# Models a plan's endpoint serves under another name than the one genai-prices lists: Kimi
# Code serves Moonshot's K2.7 Code as `kimi-for-coding` and K3 as `k3` (the mapping
# CLIProxyAPI's Kimi executor applies the other way).
_LISTED_AS: Final[Mapping[tuple[str | None, str], str]] = {
    ("moonshotai", "kimi-for-coding"): "kimi-k2.7-code",
    ("moonshotai", "kimi-for-coding-highspeed"): "kimi-k2.7-code-highspeed",
    ("moonshotai", "k3"): "kimi-k3",
}

KNOWN_PROVIDERS: Final = frozenset(
    {*_PRICE_PROVIDER, *_UNPRICED, "anthropic-compatible", "openai-compatible", "antigravity"}
)
"""Every provider name rungway knows; used to tell `provider/glob` override keys apart."""


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """A model's list price in US dollars per million tokens."""

    input_per_mtok: Decimal
    output_per_mtok: Decimal
    cache_read_per_mtok: Decimal | None
    cache_write_per_mtok: Decimal | None
    source: str

    @property
    def is_zero(self) -> bool:
        """True when both input and output tokens cost nothing."""
        return self.input_per_mtok == 0 and self.output_per_mtok == 0


def genai_prices_provider(provider: str) -> str | None:
    """The genai-prices provider id that lists `provider`'s prices, or None when it has none
    (no per-token price, or matched by model name alone)."""
    return _PRICE_PROVIDER.get(provider)


def list_price(provider: str, model: str, *, on: date | None = None) -> ModelPrice | None:
    """Return the list price of `model` at `provider` in force on `on` (default: today, UTC)."""
    return _lookup(provider, model, datetime.now(UTC).date() if on is None else on)


# Memoised because start-up classifies every configured model and each miss scans the table.
@lru_cache(maxsize=1024)
def _lookup(provider: str, model: str, on: date) -> ModelPrice | None:
    listed = find_listed_price(provider, model, on)
    return None if listed is None else _to_model_price(listed)


def find_listed_price(provider: str, model: str, on: date) -> ListedPrice | None:
    """The genai-prices entry for `model` at `provider` in force on `on`, if the table has one."""
    info = _find_model(provider, model)
    return None if info is None else _price_in_force(info, on)


@cache
def _bundled_snapshot() -> DataSnapshot:
    # Imported here, not at module level: the table is a 1.6 MB module and importing
    # rungway.pricing should cost nothing until a price is asked for.
    from genai_prices.data import providers  # noqa: PLC0415

    return DataSnapshot(providers=providers, from_auto_update=False)


def _find_model(provider: str, model: str) -> ModelInfo | None:
    if provider in _UNPRICED:
        return None
    model = _LISTED_AS.get((_PRICE_PROVIDER.get(provider), model), model)
    try:
        _, info = _bundled_snapshot().find_provider_model(
            model, None, _PRICE_PROVIDER.get(provider), None
        )
    except LookupError:
        return None
    return info


def _price_in_force(info: ModelInfo, on: date) -> ListedPrice:
    if isinstance(info.prices, ListedPrice):
        return info.prices
    # The library takes the last entry whose constraint holds at request time. A tier has to
    # hold at every hour of the day, so dated entries are resolved for `on` while every
    # time-of-day entry after the one in force (off-peak discounts, peak surcharges) counts,
    # and the dearest of those wins.
    in_force = info.prices[0].prices
    hourly: list[ListedPrice] = []
    for conditional in reversed(info.prices):
        constraint = conditional.constraint
        if isinstance(constraint, TimeOfDateConstraint):
            hourly.append(conditional.prices)
        elif not isinstance(constraint, StartDateConstraint) or constraint.start_date <= on:
            in_force = conditional.prices
            break
    return max([in_force, *hourly], key=_dearness)


def _dearness(price: ListedPrice) -> tuple[Decimal, Decimal]:
    return (_base_rate(price.input_mtok) or Decimal(0), _base_rate(price.output_mtok) or Decimal(0))


def _base_rate(rate: Decimal | TieredPrices | None) -> Decimal | None:
    # Rates that step up past a context size: the base is the price for the smallest context.
    return rate.base if isinstance(rate, TieredPrices) else rate


def _to_model_price(price: ListedPrice) -> ModelPrice | None:
    input_rate = _base_rate(price.input_mtok)
    output_rate = _base_rate(price.output_mtok)
    if input_rate is None and output_rate is None and _prices_anything(price):
        # Priced per character, request or audio hour only: there is no token price to tier on.
        return None
    # An entry that prices nothing at all is a free model; a missing side (an embedding model's
    # output) costs nothing.
    return ModelPrice(
        input_per_mtok=Decimal(0) if input_rate is None else input_rate,
        output_per_mtok=Decimal(0) if output_rate is None else output_rate,
        cache_read_per_mtok=_base_rate(price.cache_read_mtok),
        cache_write_per_mtok=_base_rate(price.cache_write_mtok),
        source=PRICE_SOURCE,
    )


def _prices_anything(price: ListedPrice) -> bool:
    return any(rate is not None for rate in vars(price).values())


def listed_context_window(provider: str, model: str) -> int | None:
    """The input tokens genai-prices lists `model` at `provider` as accepting, if it lists any."""
    info = _find_model(provider, model)
    return None if info is None else info.context_window
