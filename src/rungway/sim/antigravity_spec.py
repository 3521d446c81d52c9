"""What a scenario's `antigravity:` section says: the login's project and tier, and the
Google One AI credits it holds."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AntigravityCredits(_Frozen):
    """Google One AI credits (`paidTier.availableCredits`): a request that sends
    `enabledCreditTypes: ["GOOGLE_ONE_AI"]` past its model's spent quota is served and
    costs `per_request` of them, while the balance is at least `minimum`."""

    balance: int = Field(default=0, ge=0)
    minimum: int = Field(default=50, ge=0)
    per_request: int = Field(default=10, ge=1)


class AntigravitySpec(_Frozen):
    """An Antigravity login: the project `loadCodeAssist` names, its tier, and credits.

    With `clients: antigravity` the upstream serves only requests whose user agent is the
    Antigravity client's (`antigravity/...`), as Google's terms for Antigravity allow;
    `any` stands for an upstream that does not check."""

    project: str = Field(default="sim-antigravity-project", min_length=1)
    tier: str = Field(default="g1-pro-tier", min_length=1)
    tier_name: str = "Google AI Pro"
    credits: AntigravityCredits | None = None
    clients: Literal["antigravity", "any"] = "antigravity"
