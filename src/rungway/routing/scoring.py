"""Ranking candidates inside one rung: headroom, price and health.

The ladder sorts by rung first and by score second, so nothing here can move a candidate
across rungs. Equal scores keep the roster's order.

Fit to the request is not scored: a model outside the asked-for category, or lacking a
capability the request needs, is skipped before ranking, and every model left fits alike. A
fit weight (always 1.0) only added the same constant to every score.
"""

from __future__ import annotations

from rungway.routing.autoid import Ladder

Weights = tuple[float, float, float]
"""Weights of headroom, price and health; they add up to 1."""

WEIGHTS: dict[Ladder, Weights] = {
    # Thrifty is about money first; the subscription ladder has no price to weigh. The
    # ratios are those of the earlier four weights, whose fit term was the same for all.
    Ladder.THRIFTY: (1 / 3, 4 / 9, 2 / 9),
    Ladder.SUBSCRIPTION: (0.625, 0.0, 0.375),
}


def score(
    headroom: float | None,
    price: float | None,
    health: float,
    *,
    price_range: tuple[float, float] | None,
    weights: Weights,
) -> float:
    """A score in 0..1, comparable only with candidates of the same rung and request.

    `headroom` is the remaining percent (None when unread), `health` is 0..1.
    `price_range` is the (cheapest, dearest) input price on the candidate's rung, or None on
    a rung that costs nothing extra: on a plan, keyless or free rung every model is free,
    and ranking them by list price would pick the weakest model for no saving.
    """
    w_headroom, w_price, w_health = weights
    level = 0.5 if headroom is None else headroom / 100.0
    if price_range is None:
        cheapness = 1.0
    elif price is None:
        cheapness = 0.0
    else:
        cheapest, dearest = price_range
        cheapness = 1.0 if dearest <= cheapest else 1.0 - (price - cheapest) / (dearest - cheapest)
    return w_headroom * level + w_price * cheapness + w_health * health
