"""Budgets per paid rung and per client key: each request's worst case, reserved first.

A request bound for a paid rung reserves its cost ceiling; the rung's (and the client
key's) spent plus reserved amount may never pass its budget. The reservation settles to
the real cost when the request is recorded and is released when the attempt fails.
"""

from rungway.budget.ceiling import DEFAULT_OUTPUT_CEILING, cost_ceiling
from rungway.budget.local import (
    HeldFor,
    KeyBudget,
    LocalBudget,
    Reservation,
    ReservationLog,
    Shortfall,
)
from rungway.budget.period import period_start
from rungway.budget.unavailable import BudgetUnavailable

__all__ = [
    "DEFAULT_OUTPUT_CEILING",
    "BudgetUnavailable",
    "HeldFor",
    "KeyBudget",
    "LocalBudget",
    "Reservation",
    "ReservationLog",
    "Shortfall",
    "cost_ceiling",
    "period_start",
]
