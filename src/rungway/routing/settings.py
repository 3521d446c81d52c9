"""The ladder's tuning, exactly as the `ladder:` config section: there is no on/off switch."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rungway.routing.rungs import Rung

Percent = Annotated[float, Field(ge=0, le=100)]
RungName = Literal["subscription", "keyless", "free", "cheap", "premium"]


class LadderSettings(BaseModel):
    """Cut-offs, staleness and per-rung budgets."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    exit_cutoff_percent: Percent = 2.0
    """A window in play leaves when its remaining percent is at or below this."""
    reentry_min_remaining_percent: Percent = 5.0
    """A window last seen exhausted comes back only above this."""
    max_state_age_s: Annotated[float, Field(gt=0)] = 180.0
    """A reading older than this is stale (and one past its reset instant, at once)."""
    rung_budget_usd: dict[RungName, Annotated[float, Field(ge=0)]] = Field(default_factory=dict)
    """Spend allowed per budget period; 0 disables a rung outright, absent means no limit."""
    budget_period: Literal["day", "week", "month"] = "month"
    reservation_ttl_s: Annotated[float, Field(gt=0)] = 3600.0
    """How long a paid attempt's reservation may stay open; longer than the longest request.
    One left behind by a crash holds its money until then."""

    @model_validator(mode="after")
    def _reentry_not_below_exit(self) -> LadderSettings:
        if self.reentry_min_remaining_percent < self.exit_cutoff_percent:
            raise ValueError(
                "reentry_min_remaining_percent must be at or above exit_cutoff_percent, "
                "or a window could leave and come back at the same reading"
            )
        return self

    def budget_for(self, rung: Rung) -> float | None:
        """The budget of `rung`, or None when it has none."""
        for name, budget in self.rung_budget_usd.items():
            if name == rung.label:
                return budget
        return None
