"""How a shared store is doing, as `/healthz`, `rungway status` and `rungway doctor` show it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StoreHealth:
    """One shared store's health: answering or not, and what the operator should know."""

    store: str
    """`redis` or `postgres`."""
    up: bool
    detail: str
    """The address (never a password) and, when down, since when and why."""


HealthOf = Callable[[], Iterable[StoreHealth]]
"""The health of every shared store the gateway uses, now (none for a lone embedded one)."""
