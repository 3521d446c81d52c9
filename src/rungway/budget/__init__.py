"""Budgets per paid rung: what each request may cost at most, reserved before it is sent.

A request bound for a paid rung reserves its cost ceiling; the rung's spent plus reserved
amount may never pass its budget. The reservation settles to the real cost when the
request is recorded and is released when the attempt fails.
"""

from rungway.budget.ceiling import DEFAULT_OUTPUT_CEILING, cost_ceiling
from rungway.budget.local import LocalBudget, Reservation
from rungway.budget.period import period_start

__all__ = ["DEFAULT_OUTPUT_CEILING", "LocalBudget", "Reservation", "cost_ceiling", "period_start"]
