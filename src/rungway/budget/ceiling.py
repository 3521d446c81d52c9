"""The most a request could cost: its input estimate and its output limit at list price.

It is read from the body that goes upstream, not the client's: translation and thinking
can raise the output limit far above what the client asked for (a thinking budget needs
`max_tokens` above it), and a second try within a model's limit lowers it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rungway.pricing import PriceBook

DEFAULT_OUTPUT_CEILING = 32_768
"""Output tokens assumed when a request sets no limit: the largest output most models allow."""
_BYTES_PER_TOKEN = 3
"""JSON request bodies run near four bytes a token; three keeps the estimate on the high side."""
_OUTPUT_LIMITS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


_LIST_PRICES = PriceBook()


def cost_ceiling(
    provider: str,
    model: str,
    body: Mapping[str, Any],
    body_bytes: int,
    *,
    prices: PriceBook | None = None,
) -> float:
    """The request's maximum cost in US dollars, at the config's `prices:` where it prices
    the model, else at list price; 0 when the model has neither."""
    rates = (prices or _LIST_PRICES).rates(provider, model)
    if rates is None:
        return 0.0
    return rates.ceiling(body_bytes // _BYTES_PER_TOKEN + 1, output_limit(body))


def output_limit(body: Mapping[str, Any]) -> int:
    """The request's own output limit, or the default ceiling."""
    # The largest field that is set: an upstream that reads another of them must not be
    # able to produce more than was held for.
    found = 0
    for name in _OUTPUT_LIMITS:
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > found:
            found = value
    return found or DEFAULT_OUTPUT_CEILING
