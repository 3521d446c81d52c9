"""What a scenario's `oauth:` section says: the token endpoint's style, tokens and faults."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

TokenStyle = Literal["anthropic", "codex", "copilot", "google"]


class TokenFault(BaseModel):
    """One queued answer of the token endpoint."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["rate_limited", "invalid_grant", "server_error"]
    retry_after_s: float = Field(default=30.0, ge=0)


class OAuthSpec(BaseModel):
    """The token endpoint a scenario serves next to its API."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    style: TokenStyle
    refresh_token: str = Field(min_length=1)
    """The refresh token accepted at first (the GitHub token for `copilot`)."""
    access_ttl_s: float = Field(default=3600.0, gt=0)
    access_expires_at: float | None = None
    """When the scenario's own `auth.token` expires (never, unless set or expired)."""
    rotate_refresh_token: bool | None = None
    """Whether a refresh sends a new refresh token (default: only the codex style)."""
    faults: tuple[TokenFault, ...] = ()
