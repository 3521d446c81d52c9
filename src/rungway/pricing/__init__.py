"""Pricing: list prices per million tokens and the tier (free, cheap, premium) they put a model in.

Wraps the price table bundled with genai-prices; reads no network and nothing else from
rungway. `classify_tier` is what routing calls; `list_price` is what it reads.
"""

from rungway.pricing.prices import ModelPrice, list_price
from rungway.pricing.tiers import Tier, TierSettings, TierVerdict, classify_tier

__all__ = ["ModelPrice", "Tier", "TierSettings", "TierVerdict", "classify_tier", "list_price"]
