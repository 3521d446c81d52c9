"""The most a request could cost: its input estimate and its output limit at list price.

It is read from the body that goes upstream, not the client's: translation and thinking
can raise the output limit far above what the client asked for (a thinking budget needs
`max_tokens` above it), and a second try within a model's limit lowers it. A body that
sets no output limit can make the model write as much as it is able to: the model's own
limit from the catalog (`models.capabilities`), or the default for a model it does not know.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rungway.pricing import PriceBook

DEFAULT_OUTPUT_CEILING = 32_768
"""Output tokens assumed when neither the request nor the catalog sets a limit: the
largest output most models allow."""
_BYTES_PER_TOKEN = 3
"""JSON request bodies run near four bytes a token; three keeps the estimate on the high side."""
_OUTPUT_LIMITS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
_GEMINI_LIMITS = (
    ("generationConfig", "maxOutputTokens"),
    ("generation_config", "max_output_tokens"),
)


_LIST_PRICES = PriceBook()


def cost_ceiling(
    provider: str,
    model: str,
    body: Mapping[str, Any],
    body_bytes: int,
    *,
    prices: PriceBook | None = None,
    model_limit: int | None = None,
) -> float:
    """The request's maximum cost in US dollars, at the config's `prices:` where it prices
    the model, else at list price; 0 when the model has neither. `model_limit` is the
    model's own output limit, held when the body sets none."""
    rates = (prices or _LIST_PRICES).rates(provider, model)
    if rates is None:
        return 0.0
    return rates.ceiling(input_estimate(body_bytes), output_limit(body, model_limit))


def input_estimate(body_bytes: int) -> int:
    """The most input tokens a body of `body_bytes` holds, by a generous estimate."""
    return body_bytes // _BYTES_PER_TOKEN + 1


def output_limit(body: Mapping[str, Any], model_limit: int | None = None) -> int:
    """The request's own output limit, else the model's, else the default ceiling."""
    return requested_output_limit(body) or model_limit or DEFAULT_OUTPUT_CEILING


def requested_output_limit(body: Mapping[str, Any]) -> int | None:
    """The output limit the request body sets, or None when it sets none."""
    # The largest field that is set: an upstream that reads another of them must not be
    # able to produce more than was held for.
    found = 0
    values = [body.get(name) for name in _OUTPUT_LIMITS]
    for outer, name in _GEMINI_LIMITS:
        config = body.get(outer)
        if isinstance(config, dict):
            values.append(config.get(name))
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool) and value > found:
            found = value
    return found or None


def output_that_fits(
    provider: str,
    model: str,
    body_bytes: int,
    available_usd: float,
    *,
    prices: PriceBook | None = None,
) -> int | None:
    """The most output tokens a request of `body_bytes` may ask for and still cost at most
    `available_usd`: 0 when not even its input fits, None when the model has no price."""
    rates = (prices or _LIST_PRICES).rates(provider, model)
    if rates is None:
        return None
    tokens = input_estimate(body_bytes)
    input_cost = rates.ceiling(tokens, 0)
    per_output = rates.ceiling(tokens, 1) - input_cost
    if available_usd <= input_cost:
        return 0
    if per_output <= 0:
        return None
    fits = max(0, math.floor((available_usd - input_cost) / per_output))
    # The division may round by a token either way; the ceiling itself decides.
    if fits and rates.ceiling(tokens, fits) > available_usd:
        return fits - 1
    return fits + 1 if rates.ceiling(tokens, fits + 1) <= available_usd else fits
