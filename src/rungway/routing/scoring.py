"""Ranking candidates inside one rung: headroom, price, health and category fit.

The ladder sorts by rung first and by score second, so nothing here can move a candidate
across rungs. Equal scores keep the roster's order.
"""

from __future__ import annotations

from dataclasses import dataclass

from rungway.routing.autoid import Ladder

_WEIGHTS = {
    # Thrifty is about money first; the subscription ladder has no price to weigh.
    Ladder.THRIFTY: (0.3, 0.4, 0.2, 0.1),
    Ladder.SUBSCRIPTION: (0.5, 0.0, 0.3, 0.2),
}


@dataclass(frozen=True, slots=True)
class Signals:
    """What the scorer reads of one candidate; each factor in 0..1, None when unknown."""

    headroom: float | None
    price: float | None
    health: float
    fit: float


def score(
    signals: Signals, cheapest: float, dearest: float, ladder: Ladder, *, paid: bool
) -> float:
    """A score in 0..1, comparable only with candidates of the same rung and request.

    List price counts only on paid rungs: on a plan, keyless or free rung every model costs
    nothing extra, and ranking them by list price would pick the weakest model for no saving.
    """
    w_headroom, w_price, w_health, w_fit = _WEIGHTS[ladder]
    headroom = 0.5 if signals.headroom is None else signals.headroom / 100.0
    if not paid:
        price = 1.0
    elif signals.price is None:
        price = 0.0
    elif dearest <= cheapest:
        price = 1.0
    else:
        price = 1.0 - (signals.price - cheapest) / (dearest - cheapest)
    return w_headroom * headroom + w_price * price + w_health * signals.health + w_fit * signals.fit
