"""The most a request could cost: its input estimate and its output limit at list price."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rungway.pricing import rates_for

DEFAULT_OUTPUT_CEILING = 32_768
"""Output tokens assumed when a request sets no limit: the largest output most models allow."""
_BYTES_PER_TOKEN = 3
"""JSON request bodies run near four bytes a token; three keeps the estimate on the high side."""
_OUTPUT_LIMITS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def cost_ceiling(provider: str, model: str, body: Mapping[str, Any], body_bytes: int) -> float:
    """The request's maximum cost in US dollars; 0 when the model has no list price."""
    rates = rates_for(provider, model)
    if rates is None:
        return 0.0
    return rates.ceiling(body_bytes // _BYTES_PER_TOKEN + 1, output_limit(body))


def output_limit(body: Mapping[str, Any]) -> int:
    """The request's own output limit, or the default ceiling."""
    for name in _OUTPUT_LIMITS:
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return DEFAULT_OUTPUT_CEILING
