"""What a request's tokens cost at list price, and the most a request could cost.

The rates come from the genai-prices table (see `prices.py`); the arithmetic is done here
because it runs once per request: a rate that steps up past a context size applies to all
tokens once the request's whole input passes the step, as genai-prices counts it. Input
here excludes cache reads and writes, which are priced at their own rates (or at the input
rate when the table has none for them).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from functools import lru_cache

from genai_prices.types import TieredPrices

from rungway.pricing.prices import find_listed_price

_PER_MTOK = 1_000_000.0
Rate = tuple[float, tuple[tuple[int, float], ...]]
"""A base rate per million tokens, and the steps (whole input above `start` -> rate)."""


@dataclass(frozen=True, slots=True)
class TokenCounts:
    """Token counts of one request; `input_tokens` excludes cache reads and writes."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Rates:
    """A model's list rates in US dollars per million tokens."""

    input: Rate
    output: Rate
    cache_read: Rate
    cache_write: Rate

    def cost(self, tokens: TokenCounts) -> float:
        """The list price of `tokens`, in US dollars."""
        whole_input = tokens.input_tokens + tokens.cache_read_tokens + tokens.cache_write_tokens
        return (
            tokens.input_tokens * _rate(self.input, whole_input)
            + tokens.output_tokens * _rate(self.output, whole_input)
            + tokens.cache_read_tokens * _rate(self.cache_read, whole_input)
            + tokens.cache_write_tokens * _rate(self.cache_write, whole_input)
        ) / _PER_MTOK

    def ceiling(self, input_tokens: int, max_output_tokens: int) -> float:
        """The most a request of `input_tokens` may cost if it writes `max_output_tokens`.

        Every input token is priced at the dearest of the input and cache-write rates,
        so no use of the cache makes the real cost exceed it.
        """
        dearest_input = max(_rate(self.input, input_tokens), _rate(self.cache_write, input_tokens))
        return (
            input_tokens * dearest_input + max_output_tokens * _rate(self.output, input_tokens)
        ) / _PER_MTOK


def rates_for(provider: str, model: str, *, on: date | None = None) -> Rates | None:
    """The list rates of `model` at `provider` (None when the table has no token price)."""
    return _rates(provider, model, datetime.now(UTC).date() if on is None else on)


@lru_cache(maxsize=1024)
def _rates(provider: str, model: str, on: date) -> Rates | None:
    listed = find_listed_price(provider, model, on)
    if listed is None:
        return None
    input_rate = _as_rate(listed.input_mtok)
    return Rates(
        input=input_rate,
        output=_as_rate(listed.output_mtok),
        cache_read=_as_rate(listed.cache_read_mtok, input_rate),
        cache_write=_as_rate(listed.cache_write_mtok, input_rate),
    )


def _as_rate(rate: Decimal | TieredPrices | None, missing: Rate = (0.0, ())) -> Rate:
    if rate is None:
        return missing
    if isinstance(rate, TieredPrices):
        return float(rate.base), tuple((tier.start, float(tier.price)) for tier in rate.tiers)
    return float(rate), ()


def _rate(rate: Rate, whole_input: int) -> float:
    base, steps = rate
    for start, stepped in reversed(steps):
        if whole_input > start:
            return stepped
    return base
