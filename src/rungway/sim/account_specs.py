"""The provider accounts a scenario can stand for, beyond its windows: a ChatGPT plan's
credits (Codex), a Claude plan's extra usage, a Copilot seat, an OpenRouter key's credit
limit, a Gemini Code Assist login, and a pool of accounts of one plan. Section numbers
such as A4.3 are those of docs/provider-signals.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

CreditReset = Literal["daily", "weekly", "monthly"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CodexCreditsSpec(_Frozen):
    """The credit balance a ChatGPT plan reports next to its windows (A4.3, A4.4).

    With `has_credits` or `unlimited`, requests past a spent plan window are still served,
    paid from the credits.
    """

    has_credits: bool = False
    unlimited: bool = False
    balance: str = "0"


class ExtraUsageSpec(_Frozen):
    """A Claude plan's extra usage (A2.3, A2.5), billed in credits against a monthly limit.

    While `enabled` and `used_credits` is under `monthly_limit`, requests past a spent
    account-wide window are still served (and billed), with `overage-in-use: true`; else
    they are refused as without it. The `anthropic-ratelimit-unified-overage-*` headers
    and the usage endpoint's `extra_usage` report it either way.
    """

    enabled: bool = False
    monthly_limit: int = Field(default=5000, ge=0)
    used_credits: int = Field(default=0, ge=0)

    @property
    def serving(self) -> bool:
        """Whether requests past a spent window are served as extra usage now."""
        return self.enabled and self.used_credits < self.monthly_limit


class CodexSpec(_Frozen):
    """A ChatGPT plan as Codex sees it.

    Its first two account-wide windows, in the order listed, are reported as `primary`
    and `secondary`; list the weekly window alone to reproduce the recorded Pro capture
    where primary is weekly and secondary is empty (A4.3). The usage endpoint reports
    each window `window_seconds_short_by` seconds short of its length, as the capture
    does (17940 s for 5 h, 604740 s for 7 d; A4.4).
    """

    plan_type: str = "plus"
    credits: CodexCreditsSpec = CodexCreditsSpec()
    window_seconds_short_by: int = Field(default=60, ge=0)


class CopilotSpec(_Frozen):
    """A GitHub Copilot seat: its plan and what happens past the premium allowance (A5.3).

    `window` names the premium-request window (a `requests` window applying to every
    model); by default it is the first such window, and a seat without one is unlimited.
    With `overage_permitted` requests past the allowance are still served (and billed).
    """

    plan: str = "individual"
    sku: str = "monthly_subscriber"
    overage_permitted: bool = False
    window: str | None = None
    login: str = "sim-user"


class CreditsSpec(_Frozen):
    """An OpenRouter key's credit limit (A7): `limit: null` is unlimited.

    With `reset` set the limit applies to each UTC day, week (from Monday) or month.
    """

    limit: float | None = Field(default=None, ge=0)
    reset: CreditReset | None = None
    label: str = "sim-key"
    is_free_tier: bool = False


class CodeAssistSpec(_Frozen):
    """A Gemini Code Assist login (A6.1): the Google Cloud project its requests must name
    and the tier `loadCodeAssist` reports."""

    project: str = Field(default="sim-project-123456", min_length=1)
    tier: Literal["free-tier", "legacy-tier", "standard-tier"] = "free-tier"


class PoolSpec(_Frozen):
    """Several accounts of one plan, each bought at a different time (see `Scenario.pool`).

    Account `i` (1-based) gets its own credential, the scenario's token with `-i` appended,
    and its own windows, each on a grid `(i - 1) * stagger_s` after account 1's (modulo the
    window's length), so their resets are staggered as the what-if replay staggers the
    accounts of `--accounts` (`whatif/accounts.py`). Without `stagger_s` each window's
    resets are spread evenly over its length: `length_s / accounts` apart.
    """

    accounts: int = Field(ge=2, le=64)
    stagger_s: float | None = Field(default=None, gt=0)

    def started_ago_s(self, account: int, length_s: float) -> float:
        """How long before the start the window of `length_s` of account `account` (1-based)
        began its current instance: account 1's began at the start."""
        step = length_s / self.accounts if self.stagger_s is None else self.stagger_s
        return (-(account - 1) * step) % length_s
