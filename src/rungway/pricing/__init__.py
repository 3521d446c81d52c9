"""Pricing: list prices per million tokens (and the config's `prices:` over them), the tier
(free, cheap, premium) they put a model in, and what a request's tokens cost.

Wraps the price table bundled with genai-prices; reads no network and nothing else from
rungway. `classify_tier` is what routing calls; `list_price` is what it reads.
"""

from rungway.pricing.cost import Rates, TokenCounts, rates_for
from rungway.pricing.overrides import PriceBook, PriceOverride
from rungway.pricing.prices import ModelPrice, list_price
from rungway.pricing.tiers import Tier, TierSettings, TierVerdict, classify_tier

__all__ = [
    "ModelPrice",
    "PriceBook",
    "PriceOverride",
    "Rates",
    "Tier",
    "TierSettings",
    "TierVerdict",
    "TokenCounts",
    "classify_tier",
    "list_price",
    "rates_for",
]
