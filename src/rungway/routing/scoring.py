"""Ranking candidates inside one rung: headroom, price, health and category fit.

The ladder sorts by rung first and by score second, so nothing here can move a candidate
across rungs. Equal scores keep the roster's order.
"""

from __future__ import annotations

from rungway.routing.autoid import Ladder

Weights = tuple[float, float, float, float]
"""Weights of headroom, price, health and category fit."""

WEIGHTS: dict[Ladder, Weights] = {
    # Thrifty is about money first; the subscription ladder has no price to weigh.
    Ladder.THRIFTY: (0.3, 0.4, 0.2, 0.1),
    Ladder.SUBSCRIPTION: (0.5, 0.0, 0.3, 0.2),
}


def score(
    headroom: float | None,
    price: float | None,
    health: float,
    *,
    fit: float,
    price_range: tuple[float, float] | None,
    weights: Weights,
) -> float:
    """A score in 0..1, comparable only with candidates of the same rung and request.

    `headroom` is the remaining percent (None when unread), `health` and `fit` are 0..1.
    `price_range` is the (cheapest, dearest) input price on the candidate's rung, or None on
    a rung that costs nothing extra: on a plan, keyless or free rung every model is free,
    and ranking them by list price would pick the weakest model for no saving.
    """
    w_headroom, w_price, w_health, w_fit = weights
    level = 0.5 if headroom is None else headroom / 100.0
    if price_range is None:
        cheapness = 1.0
    elif price is None:
        cheapness = 0.0
    else:
        cheapest, dearest = price_range
        cheapness = 1.0 if dearest <= cheapest else 1.0 - (price - cheapest) / (dearest - cheapest)
    return w_headroom * level + w_price * cheapness + w_health * health + w_fit * fit
