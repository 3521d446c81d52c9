"""The project an Antigravity login works in, and whether it may spend AI credits.

Antigravity asks Cloud Code (`cloudcode-pa`) the Code Assist way (`code_assist.py`), with
its own words, as two open gateways send them:
- `loadCodeAssist` with `{"metadata": {"ideType": "ANTIGRAVITY"}}` (no platform, no plugin
  type);
- `onboardUser` with `{"tier_id", "metadata": {"ide_type", "ide_version", "ide_name"}}`
  (snake case), to the tier `paidTier.id`, else `currentTier.id` (unless some tier is
  ineligible), else the default of `allowedTiers`, else `legacy-tier`;
- an account already on a tier without a project is onboarded too: Antigravity names no
  Google Cloud project of the user's.

`loadCodeAssist` also says whether the login holds Google One AI credits:
`paidTier.availableCredits[]` of `creditType` `GOOGLE_ONE_AI`, whose `creditAmount` (an
int64, so a string) is at least its `minimumCreditAmountForUsage`. A connection with
`credits: true` spends them past its quota; it then meters to paid (`credits_in_use`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic import SecretStr

from rungway.adapters.antigravity.adapter import USER_AGENT, VERSION
from rungway.credentials.code_assist import (
    ONBOARD_WAIT_S,
    CodeAssistProject,
    Renew,
    Send,
    Token,
    default_tier,
    static_token,
)
from rungway.credentials.grants import send_token_request
from rungway.credentials.manager import TokenManager

CREDIT_TYPE: Final = "GOOGLE_ONE_AI"
LOAD_METADATA: Final = {"ideType": "ANTIGRAVITY"}
ONBOARD_METADATA: Final = {
    "ide_type": "ANTIGRAVITY",
    "ide_version": VERSION,
    "ide_name": "antigravity",
}
_LEGACY_TIER = "legacy-tier"


class AntigravityProject(CodeAssistProject):
    """An Antigravity connection's project, and its AI credits as `loadCodeAssist` tells."""

    named_project_needed = False
    headers: Mapping[str, str] = {"user-agent": USER_AGENT}

    def __init__(
        self,
        base_url: str,
        token: Token,
        *,
        renew: Renew | None = None,
        credits: bool = False,
        send: Send = send_token_request,
        wait_s: float = ONBOARD_WAIT_S,
    ) -> None:
        super().__init__(base_url, token, renew=renew, send=send, wait_s=wait_s)
        self._credits_wanted = credits
        self._credits_held: bool | None = None

    def credits_in_use(self) -> bool | None:
        """True when requests past the quota are paid from credits: the config allows it
        and the login held at least the minimum when `loadCodeAssist` answered (spent since,
        its 429 says `INSUFFICIENT_G1_CREDITS_BALANCE`); None before it answered."""
        if not self._credits_wanted:
            return False
        return self._credits_held

    def load_request(self) -> dict[str, Any]:
        """`{"metadata": {"ideType": "ANTIGRAVITY"}}`."""
        return {"metadata": dict(LOAD_METADATA)}

    def loaded(self, loaded: Mapping[str, Any]) -> None:
        """Note whether the login holds credits enough to spend."""
        self._credits_held = holds_credits(loaded)

    def onboard_tier(self, loaded: Mapping[str, Any]) -> str:
        """The paid tier, else the current one, else the default allowed, else legacy."""
        for key in ("paidTier", "currentTier"):
            tier = loaded.get(key)
            ineligible = key == "currentTier" and bool(loaded.get("ineligibleTiers"))
            if isinstance(tier, dict) and isinstance(tier.get("id"), str) and not ineligible:
                return str(tier["id"])
        return default_tier(loaded) or _LEGACY_TIER

    def onboard_request(self, tier: str) -> dict[str, Any]:
        """`{"tier_id", "metadata"}`."""
        return {"tier_id": tier, "metadata": dict(ONBOARD_METADATA)}


def holds_credits(loaded: Mapping[str, Any]) -> bool:
    """True when `paidTier.availableCredits` holds Google One AI credits at or above their
    minimum for use; a paid tier without the list holds none."""
    tier = loaded.get("paidTier")
    credits = tier.get("availableCredits") if isinstance(tier, dict) else None
    for credit in credits if isinstance(credits, list) else ():
        if not isinstance(credit, dict) or credit.get("creditType") != CREDIT_TYPE:
            continue
        amount = _int(credit.get("creditAmount"))
        minimum = _int(credit.get("minimumCreditAmountForUsage")) or 0
        if amount is not None and amount > 0 and amount >= minimum:
            return True
    return False


def _int(value: object) -> int | None:
    # int64 amounts come as JSON strings; a number is taken too.
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def login_project(
    provider: str,
    base_url: str,
    login: TokenManager | None,
    secret: SecretStr | None,
    *,
    configured: str | None = None,
    credits: bool = False,
    send: Send = send_token_request,
) -> CodeAssistProject | None:
    """The project holder of a Cloud Code connection (`antigravity`, or the retired
    `gemini-code-assist`); None for other providers. Its token comes from the stored `login`
    that renews itself, else the `secret` read at start; `configured` is the project the
    config names (Code Assist only), `credits` whether AI credits may be spent (Antigravity
    only); `send` carries its requests."""
    if provider not in ("antigravity", "gemini-code-assist"):
        return None
    token = static_token(secret) if login is None else login.token
    renew = None if login is None else login.refresh_after_unauthorized
    if provider == "antigravity":
        return AntigravityProject(base_url, token, renew=renew, credits=credits, send=send)
    return CodeAssistProject(base_url, token, renew=renew, configured=configured, send=send)
