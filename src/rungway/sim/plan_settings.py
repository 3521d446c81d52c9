"""Settings of the flat-rate coding plans a scenario can stand for: Kimi Code and the
MiniMax Token Plan (docs/provider-signals.md, Kimi Code and MiniMax Token Plan)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class KimiSpec(_Frozen):
    """A Kimi Code membership and its booster wallet, the extra usage billed past the plan.

    With `booster_cents` left and the monthly cap (when set) not reached, requests past a
    spent window are still served; otherwise they are refused with 403
    `access_terminated_error`. The wallet's balance is reported, not drawn down.
    """

    level: str = "LEVEL_ADVANCED"
    booster_cents: float = Field(default=0.0, ge=0)
    monthly_cap_cents: int | None = Field(default=None, ge=0)
    monthly_used_cents: int = Field(default=0, ge=0)

    @property
    def booster_serving(self) -> bool:
        """Whether the wallet pays for requests past a spent window now."""
        capped = self.monthly_cap_cents is not None and (
            self.monthly_used_cents >= self.monthly_cap_cents
        )
        return self.booster_cents > 0 and not capped


class MiniMaxSpec(_Frozen):
    """A MiniMax Token Plan: its title, and which generation of `remains` body it reports.

    `counts: false` (the default) is the shape served since mid-2026: the text row is named
    `general`, its counts are 0 and `*_remaining_percent` carries the quota; `counts: true`
    is the older shape, a `MiniMax-M2.5` row with counts only.
    """

    title: str = "Plus"
    counts: bool = False
