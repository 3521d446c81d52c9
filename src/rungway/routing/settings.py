"""The ladder's tuning, exactly as the `ladder:` config section: there is no on/off switch."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rungway.routing.rungs import Rung

Percent = Annotated[float, Field(ge=0, le=100)]
RungName = Literal["subscription", "keyless", "free", "cheap", "premium"]
PoolStrategyName = Literal["fill_first", "soonest_reset", "headroom", "expiry_first"]


DEFAULT_RUNG_BUDGETS_USD: Mapping[RungName, float | None] = MappingProxyType(
    {"cheap": 5.0, "premium": 0.0}
)
"""The paid rungs' budgets unless the config says otherwise: a tool for controlling spend
starts with a small cheap rung and the premium rung closed."""


class LadderSettings(BaseModel):
    """Cut-offs, staleness and per-rung budgets."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    exit_cutoff_percent: Percent = 2.0
    """A window in play leaves when its remaining percent is at or below this."""
    reentry_min_remaining_percent: Percent = 5.0
    """A window last seen exhausted comes back only above this."""
    max_state_age_s: Annotated[float, Field(gt=0)] = 180.0
    """A reading older than this is stale (and one past its reset instant, at once)."""
    rung_budget_usd: dict[RungName, Annotated[float, Field(ge=0)] | None] = Field(
        default_factory=lambda: dict(DEFAULT_RUNG_BUDGETS_USD)
    )
    """Spend allowed per budget period; 0 closes a rung, `null` means no limit. A paid rung
    left out keeps its default (`DEFAULT_RUNG_BUDGETS_USD`)."""
    budget_period: Literal["day", "week", "month"] = "month"
    reservation_ttl_s: Annotated[float, Field(gt=0)] = 3600.0
    """How long a paid attempt's reservation may stay open; longer than the longest request.
    One left behind by a crash holds its money until then."""

    pool_strategy: PoolStrategyName = "expiry_first"
    """How a pool (the connections of one plan and owner serving a model on a rung) orders
    its accounts; see `routing/pools.py`."""
    session_affinity: bool = True
    """Keep a conversation on the account that served it while that account is usable."""
    session_ttl_s: Annotated[float, Field(gt=0)] = 3600.0
    """How long a session's pin lasts after its last turn."""
    max_wait_s: Annotated[float, Field(ge=0)] = 5.0
    """A plan that could serve and resets within this many seconds is waited for instead
    of paying (`auto/thrifty`) or refusing (`auto/subscription`); 0 turns waiting off."""

    @field_validator("rung_budget_usd", mode="after")
    @classmethod
    def _defaults_for_missing_rungs(
        cls, budgets: dict[RungName, float | None]
    ) -> dict[RungName, float | None]:
        # Naming one rung must not lift the other's limit: `{cheap: 10}` keeps premium at 0.
        return {**DEFAULT_RUNG_BUDGETS_USD, **budgets}

    def unlimited_paid_rungs(self) -> list[Rung]:
        """The paid rungs the config explicitly left without a limit (`null`)."""
        return [rung for rung in Rung if rung.paid and self.budget_for(rung) is None]

    @model_validator(mode="after")
    def _reentry_not_below_exit(self) -> LadderSettings:
        if self.reentry_min_remaining_percent < self.exit_cutoff_percent:
            raise ValueError(
                "reentry_min_remaining_percent must be at or above exit_cutoff_percent, "
                "or a window could leave and come back at the same reading"
            )
        return self

    def budget_for(self, rung: Rung) -> float | None:
        """The budget of `rung`, or None when it has no limit."""
        for name, budget in self.rung_budget_usd.items():
            if name == rung.label:
                return budget
        return None
