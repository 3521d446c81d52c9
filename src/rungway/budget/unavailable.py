"""The answer of a budget that cannot be checked: its shared store does not answer.

A paid rung (or client key) with a budget is never served unmetered: while the store that
holds the cluster's spend is unreachable, every hold against such a budget is refused
with this instead of a `Reservation`, and the engine goes on to routes that need none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class BudgetUnavailable:
    """Why a hold could not be checked: whose budget, and which store did not answer."""

    account: Literal["rung", "key"]
    name: str
    store: str
    """The store as the operator knows it, e.g. `redis at 127.0.0.1:6379` (no password)."""
