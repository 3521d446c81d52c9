"""The gates a connection passes to enter a plan: operator, quota, cooldown, breaker, budget,
a price for a model on a paid rung with a budget, and what the request needs of the model.

Each gate returns a `Verdict`: `PASS` or the reason to skip. `strict` is the
`auto/subscription` reading of the evidence (anything unverified fails); without it, only
positive evidence of exhaustion fails (`auto/thrifty`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rungway.models.capabilities import ModelCapabilities, Structured
from rungway.routing.billing import BillingClass, BillingVerdict, Overage
from rungway.routing.needs import RequestNeeds
from rungway.routing.plan import SkipReason
from rungway.routing.rungs import Rung
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import (
    BreakerState,
    ConnectionState,
    QuotaWindow,
    RungSpend,
    WindowStatus,
)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A gate's answer; `headroom` is the lowest remaining percent it could read."""

    reason: SkipReason | None = None
    detail: str = ""
    resets_at: float | None = None
    headroom: float | None = None

    @property
    def passed(self) -> bool:
        """True when nothing stops the connection."""
        return self.reason is None


PASS = Verdict()
_IN_PLAY = (WindowStatus.ALLOWED, WindowStatus.WARNING)


def window_verdict(
    window: QuotaWindow, settings: LadderSettings, now: float, *, strict: bool
) -> Verdict:
    """One window's verdict, with reset-aware staleness and hysteresis.

    Evidence of exhaustion holds until the window's reset instant, however old the reading:
    an exhausted connection receives no traffic, so no newer reading would ever replace it.
    Any other reading is trusted only while it is fresh.
    """
    name = window.name
    if window.resets_at is not None and window.resets_at <= now:
        # The window this reading describes is over, and a new one starts unspent. The
        # engine re-reads a polled plan inline before `auto/subscription` plans; one read
        # from headers alone (or whose poll failed) is tried once: only a hard-stop plan
        # passes the strict ladder, and it cannot bill, so trying costs nothing and its
        # answer is the reading. Skipping it as stale would refuse at the very reset.
        return PASS
    fresh = now - window.checked_at <= settings.max_state_age_s
    exhausted = _exhaustion(window, settings)
    if exhausted is not None and (fresh or window.resets_at is not None):
        return exhausted
    if not fresh:
        age = now - window.checked_at
        return Verdict(SkipReason.QUOTA_STALE, f"{name}: read {age:.0f}s ago") if strict else PASS
    if window.status is WindowStatus.UNKNOWN or window.used_percent is None:
        return Verdict(SkipReason.QUOTA_UNKNOWN, f"{name}: no usage figure") if strict else PASS
    return Verdict(headroom=100.0 - window.used_percent)


def _exhaustion(window: QuotaWindow, settings: LadderSettings) -> Verdict | None:
    """The window's evidence of exhaustion (or of being inside the re-entry band), if any."""
    name = window.name
    if window.status is WindowStatus.REJECTED:
        return Verdict(
            SkipReason.QUOTA_EXHAUSTED, f"{name}: rejected by the upstream", window.resets_at
        )
    if window.used_percent is None or window.status is WindowStatus.UNKNOWN:
        return None
    remaining = 100.0 - window.used_percent
    exit_at = settings.exit_cutoff_percent
    threshold = settings.reentry_min_remaining_percent if window.was_exhausted else exit_at
    if remaining > threshold:
        return None
    if remaining <= exit_at:
        detail = f"{name}: {remaining:g}% left, at or below the {exit_at:g}% cut-off"
        return Verdict(SkipReason.QUOTA_EXHAUSTED, detail, window.resets_at)
    detail = (
        f"{name}: {remaining:g}% left, not yet above the {threshold:g}% re-entry level "
        "since it was exhausted"
    )
    return Verdict(SkipReason.QUOTA_REENTRY, detail, window.resets_at)


def quota_verdict(
    windows: Iterable[QuotaWindow], settings: LadderSettings, now: float, *, strict: bool
) -> Verdict:
    """All `windows` must pass; an exhausted one reports the latest reset among them."""
    headroom: float | None = None
    failed: Verdict | None = None
    seen = False
    max_age = settings.max_state_age_s
    exit_at = settings.exit_cutoff_percent
    reentry = settings.reentry_min_remaining_percent
    for window in windows:
        seen = True
        used = window.used_percent
        # The common case, a fresh reading comfortably above its threshold, decided inline;
        # every other case goes through `window_verdict`.
        if (
            used is not None
            and window.status in _IN_PLAY
            and (window.resets_at is None or window.resets_at > now)
            and now - window.checked_at <= max_age
            and 100.0 - used > (reentry if window.was_exhausted else exit_at)
        ):
            remaining = 100.0 - used
            if headroom is None or remaining < headroom:
                headroom = remaining
            continue
        verdict = window_verdict(window, settings, now, strict=strict)
        if verdict.passed:
            if verdict.headroom is not None:
                headroom = verdict.headroom if headroom is None else min(headroom, verdict.headroom)
            continue
        if failed is None or _later(verdict, failed):
            failed = verdict
    if failed is not None:
        return failed
    if not seen and strict:
        return Verdict(SkipReason.QUOTA_MISSING, "no quota reading yet")
    return Verdict(headroom=headroom)


DISABLED = Verdict(
    SkipReason.DISABLED,
    "disabled by an operator; `rungway connections enable ID` puts it back",
)


def disabled_verdict(state: ConnectionState) -> Verdict:
    """A connection an operator disabled is skipped by every ladder and every named model."""
    return DISABLED if state.disabled else PASS


def health_verdict(state: ConnectionState, now: float, *, strict: bool) -> Verdict:
    """Cooldown and breaker; a half-open breaker is a probe thrifty may send, not a plan."""
    if state.cooldown_until is not None and state.cooldown_until > now:
        reason = f" ({state.cooldown_reason})" if state.cooldown_reason else ""
        detail = f"cooling down for {state.cooldown_until - now:.0f}s more{reason}"
        return Verdict(SkipReason.COOLDOWN, detail, state.cooldown_until)
    if state.breaker is BreakerState.OPEN:
        return Verdict(
            SkipReason.BREAKER_OPEN,
            "circuit breaker open after repeated failures",
            state.breaker_open_until,
        )
    if state.breaker is BreakerState.HALF_OPEN and strict:
        return Verdict(SkipReason.BREAKER_HALF_OPEN, "circuit breaker half-open: not verified")
    return PASS


def resting_verdict(state: ConnectionState, now: float) -> Verdict:
    """A named model's gate: disabled, cooling down, or behind an open breaker.

    A half-open breaker passes: the request is the probe that may close it."""
    if state.disabled:
        return DISABLED
    return health_verdict(state, now, strict=False)


def subscription_verdict(billing: BillingVerdict) -> Verdict:
    """`auto/subscription` admits only subscription billing with a hard-stop overage."""
    if billing.billing is not BillingClass.SUBSCRIPTION:
        return Verdict(SkipReason.NOT_SUBSCRIPTION, f"billing {billing.billing} ({billing.entry})")
    if billing.live_overage and billing.overage is Overage.UNKNOWN:
        return Verdict(
            SkipReason.OVERAGE_NOT_HARD_STOP,
            f"overage not read yet from the usage endpoint ({billing.entry})",
        )
    if billing.overage is not Overage.HARD_STOP:
        return Verdict(
            SkipReason.OVERAGE_NOT_HARD_STOP,
            f"overage {billing.overage} ({billing.entry}): could bill past the plan",
        )
    return PASS


def budget_verdict(
    rung: Rung, settings: LadderSettings, spend: Mapping[Rung, RungSpend]
) -> Verdict:
    """A rung with a budget of 0 is off; one whose spend reached its budget is exhausted."""
    budget = settings.budget_for(rung)
    if budget is None:
        return PASS
    if budget <= 0:
        return Verdict(SkipReason.BUDGET_DISABLED, f"rung_budget_usd.{rung.label} is 0")
    used = spend.get(rung)
    if used is None:
        return PASS
    total = used.spent_usd + used.reserved_usd
    if total >= budget:
        detail = f"${total:.2f} spent or reserved of ${budget:.2f} ({settings.budget_period})"
        return Verdict(SkipReason.BUDGET_EXHAUSTED, detail)
    return PASS


def price_verdict(
    rung: Rung, settings: LadderSettings, provider: str, model: str, *, priced: bool
) -> Verdict:
    """A model on a paid rung with a budget needs a price: without one its hold and its cost
    would be $0, and the budget would never bind it."""
    if priced or not rung.paid or settings.budget_for(rung) is None:
        return PASS
    detail = f"no list price for {provider}/{model}: add it under `prices:` in the config"
    return Verdict(SkipReason.UNPRICED, detail)


_SERVES_JSON = (Structured.SCHEMA, Structured.JSON, Structured.TOOL)
_SERVES_SCHEMA = (Structured.SCHEMA, Structured.TOOL)


def capability_verdict(model: str, capabilities: ModelCapabilities, needs: RequestNeeds) -> Verdict:
    """A model that lacks what the request needs is skipped; an unknown capability passes.

    Structured output passes where the model's API takes the schema, or (Claude before 4.5)
    a forced tool stands in for it; a JSON mode without a schema serves only a request for
    any JSON object."""
    if needs.vision and capabilities.vision is False:
        return Verdict(SkipReason.NO_VISION, f"{model} does not read images")
    if needs.tools and capabilities.tools is False:
        return Verdict(SkipReason.NO_TOOL_USE, f"{model} does not call tools")
    window = capabilities.context_window
    if window is not None and needs.prompt_tokens > window:
        # No figure of the prompt's own: the estimate is rough, and a plan kept per kind of
        # need serves every prompt between the same two windows.
        detail = f"{model} takes {window} tokens, fewer than the prompt's estimated size"
        return Verdict(SkipReason.CONTEXT_TOO_SMALL, detail)
    structured = capabilities.structured
    if needs.structured is not None and structured is not None:
        served = _SERVES_SCHEMA if needs.structured == "schema" else _SERVES_JSON
        if structured not in served:
            asked = "a JSON schema" if needs.structured == "schema" else "JSON output"
            detail = f"{model} cannot be held to {asked} (structured output: {structured})"
            return Verdict(SkipReason.NO_STRUCTURED_OUTPUT, detail)
    return PASS


def _later(candidate: Verdict, current: Verdict) -> bool:
    # An exhausted window outranks a stale or unknown one; among exhausted ones the latest
    # reset decides when the connection is usable again.
    exhausted = (SkipReason.QUOTA_EXHAUSTED, SkipReason.QUOTA_REENTRY)
    if (candidate.reason in exhausted) != (current.reason in exhausted):
        return candidate.reason in exhausted
    return (candidate.resets_at or 0) > (current.resets_at or 0)
