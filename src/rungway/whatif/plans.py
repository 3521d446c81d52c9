"""The simulated quota of a plan connection: its windows, their capacity and how they reset.

A window counts one unit per request: `tokens` (every token the request moved, as
`TraceRequest.tokens` counts them), `requests` (one each) or `cost` (the request's list price
in US dollars at the connection's model, the cost-weighted unit providers describe as
"usage"). Alignment says when a window instance starts: `first_use` at the first request
after the previous instance ended (Claude's 5 h session), `fixed` on a grid of `length_s`
from `anchor` (epoch seconds), `midnight` every day at midnight in `zone` (Gemini's daily
quota; `length_s` is then one day). A `model` window counts only requests served by that
model (a glob is not supported: the name as the connection serves it).

`KNOWN_PLANS` gives a starting point per plan. Providers publish limits as ranges of
"messages" or "hours of use", not as fixed capacities, so every capacity there is an
estimate from the cited page: calibrate it to how you work with `--window`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["KNOWN_PLANS", "Alignment", "PlanError", "PlanQuota", "PlanWindow", "Unit"]

Unit = Literal["tokens", "requests", "cost"]
Alignment = Literal["first_use", "fixed", "midnight"]
_UNITS: frozenset[str] = frozenset(get_args(Unit))
_ALIGNMENTS: frozenset[str] = frozenset(get_args(Alignment))
_HOUR = 3600.0
_DAY = 24 * _HOUR
_WEEK = 7 * _DAY


class PlanError(ValueError):
    """A plan window or quota that cannot be simulated, with what is wrong in plain words."""


@dataclass(frozen=True, slots=True)
class PlanWindow:
    """One quota window of a plan: `capacity` units per `length_s` seconds."""

    name: str
    length_s: float
    capacity: float
    unit: Unit
    alignment: Alignment
    anchor: float = 0.0
    """Where the `fixed` grid starts, in epoch seconds."""
    zone: str = "UTC"
    """The time zone whose midnight a `midnight` window resets at."""
    model: str | None = None
    """Only requests served by this model count (a per-model window); None counts all."""

    def __post_init__(self) -> None:
        if not self.name:
            raise PlanError("a window needs a name")
        if not math.isfinite(self.length_s) or self.length_s <= 0:
            raise PlanError(f"window {self.name!r}: length must be above 0 s, not {self.length_s}")
        if not math.isfinite(self.capacity) or self.capacity <= 0:
            raise PlanError(f"window {self.name!r}: capacity must be above 0, not {self.capacity}")
        if self.unit not in _UNITS:
            raise PlanError(
                f"window {self.name!r}: unit must be one of {sorted(_UNITS)}, not {self.unit!r}"
            )
        if self.alignment not in _ALIGNMENTS:
            raise PlanError(
                f"window {self.name!r}: alignment must be one of {sorted(_ALIGNMENTS)},"
                f" not {self.alignment!r}"
            )
        if not math.isfinite(self.anchor):
            raise PlanError(f"window {self.name!r}: anchor must be an epoch second")
        try:
            ZoneInfo(self.zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise PlanError(f"window {self.name!r}: unknown time zone {self.zone!r}") from None


@dataclass(frozen=True, slots=True)
class PlanQuota:
    """The windows a plan connection's requests count against, all at once."""

    connection_id: str
    windows: tuple[PlanWindow, ...]

    def __post_init__(self) -> None:
        if not self.connection_id:
            raise PlanError("a plan quota needs a connection id")
        if not self.windows:
            raise PlanError(f"plan {self.connection_id!r} needs at least one window")
        names = [window.name for window in self.windows]
        if len(set(names)) != len(names):
            raise PlanError(f"plan {self.connection_id!r} names a window twice: {names}")


KNOWN_PLANS: dict[str, tuple[PlanWindow, ...]] = {
    # https://support.claude.com/en/articles/8324991-about-claude-s-pro-plan-usage
    # "at least 45 messages every five hours", a session starting at the first message;
    # weekly limits since 2025-08-28 (https://support.claude.com/en/articles/11145838),
    # taken here as about eight full sessions a week.
    "claude-pro": (
        PlanWindow("5h", 5 * _HOUR, 45, "requests", "first_use"),
        PlanWindow("7d", _WEEK, 360, "requests", "first_use"),
    ),
    # https://support.claude.com/en/articles/11014257-about-claude-s-max-plan-usage
    # "at least 225 messages every five hours" (5x) and "at least 900" (20x), weekly as above.
    "claude-max-5x": (
        PlanWindow("5h", 5 * _HOUR, 225, "requests", "first_use"),
        PlanWindow("7d", _WEEK, 1800, "requests", "first_use"),
    ),
    "claude-max-20x": (
        PlanWindow("5h", 5 * _HOUR, 900, "requests", "first_use"),
        PlanWindow("7d", _WEEK, 7200, "requests", "first_use"),
    ),
    # https://developers.openai.com/codex/pricing: Plus "45-225 local messages every 5h",
    # Pro "300-1,500", each with a weekly limit; the low end is taken, weekly as above.
    "chatgpt-plus": (
        PlanWindow("5h", 5 * _HOUR, 45, "requests", "first_use"),
        PlanWindow("7d", _WEEK, 360, "requests", "first_use"),
    ),
    "chatgpt-pro": (
        PlanWindow("5h", 5 * _HOUR, 300, "requests", "first_use"),
        PlanWindow("7d", _WEEK, 2400, "requests", "first_use"),
    ),
    # https://developers.google.com/gemini-code-assist/resources/quotas: 1,000 model requests
    # a day per user of Code Assist for individuals, reset at midnight Pacific time.
    "gemini-code-assist": (
        PlanWindow("1d", _DAY, 1000, "requests", "midnight", zone="America/Los_Angeles"),
    ),
    # https://docs.github.com/en/copilot/concepts/billing/copilot-requests: Copilot Pro has 300
    # premium requests a month, reset on the 1st at 00:00 UTC; a month is taken as 30 days
    # on a fixed grid, as windows here have one length.
    "copilot-pro": (PlanWindow("month", 30 * _DAY, 300, "requests", "fixed"),),
    # https://docs.z.ai/devpack/faq: the GLM Coding Plan's Lite "up to ~120 prompts every 5
    # hours", Pro "~600", Max "~2400"; the 5-hour window starts at the first prompt (its
    # quota endpoint gives it no reset until then). Its weekly window has no published
    # size: give one with --window when you know yours.
    "glm-lite": (PlanWindow("5h", 5 * _HOUR, 120, "requests", "first_use"),),
    "glm-pro": (PlanWindow("5h", 5 * _HOUR, 600, "requests", "first_use"),),
    "glm-max": (PlanWindow("5h", 5 * _HOUR, 2400, "requests", "first_use"),),
    # MiniMax Token Plan: its quota endpoint's older counted rows show Starter at 1,500
    # requests per 5 hours and 15,000 per week (MiniMax-AI/MiniMax-M2#99, a live capture in
    # openclaw#81115); Plus and Max are known only by the 5-hour totals a quota reader in
    # OmniRoute infers their names from (4,500 and 15,000). Windows run on MiniMax's own
    # clock, taken here as starting at the first request.
    "minimax-starter": (
        PlanWindow("5h", 5 * _HOUR, 1500, "requests", "first_use"),
        PlanWindow("7d", _WEEK, 15000, "requests", "first_use"),
    ),
    "minimax-plus": (PlanWindow("5h", 5 * _HOUR, 4500, "requests", "first_use"),),
    "minimax-max": (PlanWindow("5h", 5 * _HOUR, 15000, "requests", "first_use"),),
    # Kimi Code is not here: since it moved from request counts to token packages its usage
    # endpoint reports only percentages of an unpublished allowance (the Moonshot forum's
    # note on the change); give its windows with --window once calibrated.
    # Antigravity is not here either: Google's Antigravity plans page gives Google AI Pro a
    # "high, generous quota, refreshed every five hours" per model and no count (as quoted
    # in discuss.ai.google.dev thread 132403, which also reports a weekly baseline past it);
    # give its 5h window per model with --window.
}
"""Starting points for known plans. Every capacity is an estimate to calibrate with flags."""
