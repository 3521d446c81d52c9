"""The five rungs, in escalation order, and the rung of a connection for a model."""

from __future__ import annotations

from enum import IntEnum

from rungway.pricing import Tier
from rungway.routing.billing import BillingClass, BillingVerdict


class Rung(IntEnum):
    """A rung of the ladder; lower is tried first."""

    SUBSCRIPTION = 0
    KEYLESS = 1
    FREE = 2
    CHEAP = 3
    PREMIUM = 4

    @property
    def label(self) -> str:
        """The rung's name, e.g. `cheap`."""
        return self.name.lower()

    @property
    def paid(self) -> bool:
        """Paid rungs have no quota; a budget is their only exhaustion signal."""
        return self >= Rung.CHEAP


_BY_TIER = {Tier.FREE: Rung.FREE, Tier.CHEAP: Rung.CHEAP, Tier.PREMIUM: Rung.PREMIUM}


def rung_for(billing: BillingVerdict, tier: Tier) -> Rung:
    """Subscription billing -> 0; keyless -> 1; otherwise the model's tier (2, 3 or 4)."""
    if billing.billing is BillingClass.SUBSCRIPTION:
        return Rung.SUBSCRIPTION
    if billing.billing is BillingClass.KEYLESS:
        return Rung.KEYLESS
    return _BY_TIER[tier]
