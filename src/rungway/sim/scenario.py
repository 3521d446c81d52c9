"""Scenarios: the frozen description of one simulated upstream, loaded from YAML.

A scenario names the wire API served, the credential accepted, the models offered, the
quota windows and which header family reports them, the provider's usage endpoint (and
its provider-specific settings), the shape of generated replies (including the tools the
simulated model calls) and the faults queued at start. With `pool` it stands for several
accounts of one plan, bought at different times: each its own credential and windows,
their resets staggered (`sim/pool.py` serves them; the built-in `claude-pool` is three
Claude plan accounts). Section numbers such as A4.3 are
those of docs/provider-signals.md.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, Literal, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from rungway.sim.account_specs import (
    CodeAssistSpec,
    CodexCreditsSpec,
    CodexSpec,
    CopilotSpec,
    CreditReset,
    CreditsSpec,
    ExtraUsageSpec,
    PoolSpec,
)
from rungway.sim.antigravity_spec import AntigravitySpec
from rungway.sim.faults import Fault
from rungway.sim.oauth.token_spec import OAuthSpec
from rungway.sim.plan_settings import KimiSpec, MiniMaxSpec
from rungway.sim.reply_spec import ResponseSpec, ToolCallSpec

__all__ = [
    "GOOGLE_APIS",
    "ApiKind",
    "AuthSpec",
    "ClockSpec",
    "CodeAssistSpec",
    "CodexCreditsSpec",
    "CodexSpec",
    "CopilotSpec",
    "CreditReset",
    "CreditsSpec",
    "ExtraUsageSpec",
    "ModelSpec",
    "PoolSpec",
    "QuotaHeaderFamily",
    "ResponseSpec",
    "Scenario",
    "ToolCallSpec",
    "UsageEndpointKind",
    "WindowSpec",
    "WindowUnit",
    "builtin_scenario",
    "builtin_scenario_names",
    "load_scenario",
]

ApiKind = Literal[
    "anthropic",
    "openai",
    "responses",
    "gemini",
    "code-assist",
    "glm",
    "kimi-code",
    "minimax",
    "antigravity",
]
# The Gemini API, Gemini Code Assist and Antigravity (Code Assist's envelope).
GOOGLE_APIS = frozenset({"gemini", "code-assist", "antigravity"})
QuotaHeaderFamily = Literal["anthropic-unified", "anthropic-apikey", "openai", "codex", "none"]
WindowUnit = Literal["tokens", "requests", "input_tokens", "output_tokens"]
UsageEndpointKind = Literal[
    "none",
    "claude",
    "codex",
    "copilot",
    "gemini",
    "openrouter",
    "glm",
    "kimi",
    "minimax",
]
_PLAN_USAGE = {"kimi-code": "kimi", "minimax": "minimax"}


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AuthSpec(_Frozen):
    """The one credential the upstream accepts.

    `bearer` reads `Authorization: Bearer <token>`; on the Anthropic API it stands for a
    plan's OAuth token and also requires the `oauth-2025-04-20` beta. `x-api-key` is the
    API key, which the Gemini API reads from `x-goog-api-key` or `?key=`.
    """

    kind: Literal["bearer", "x-api-key", "none"] = "none"
    token: str | None = None
    clients: Literal["claude-code", "any"] | None = None
    """Which clients a plan token serves. Unset, a plan token on the Anthropic API
    (`bearer`) serves Claude Code only, as Anthropic's servers do (provider-signals A2.6);
    `any` stands for an Anthropic-shaped plan that does not check its client."""

    @model_validator(mode="after")
    def _token_when_needed(self) -> Self:
        if self.kind != "none" and not self.token:
            raise ValueError(f"auth kind {self.kind!r} needs a token")
        return self


class ModelSpec(_Frozen):
    """One model the upstream serves."""

    id: str
    display_name: str | None = None
    context_window: int | None = Field(default=None, gt=0)
    max_output_tokens: int | None = Field(default=None, gt=0)
    input_per_mtok: float | None = Field(default=None, ge=0)
    """Credits per million input tokens (OpenRouter pricing; unset means free)."""
    output_per_mtok: float | None = Field(default=None, ge=0)
    """Credits per million output tokens (OpenRouter pricing; unset means free)."""


class WindowSpec(_Frozen):
    """A quota window: `capacity` units per `length_s`, reset at fixed instants.

    `name` becomes the header infix (`5h`, `7d`, `7d_oi` for the unified family;
    `requests`, `tokens`, `input-tokens`, `output-tokens` for the others). A window with
    `model` set counts and limits only that model's requests.
    """

    name: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    claim: str | None = None
    unit: WindowUnit = "tokens"
    capacity: int = Field(gt=0)
    length_s: float = Field(gt=0)
    first_reset_at: float | None = None
    started_ago_s: float = Field(default=0.0, ge=0)
    """How long before the sim started (or was reset) the window's current instance began:
    its first reset comes `length_s - started_ago_s` after. A pool staggers its accounts'
    windows with it."""
    model: str | None = None
    reset_zone: str | None = None
    """An IANA time zone: the window resets at each midnight there instead of every
    `length_s` (Gemini's daily quotas reset at midnight America/Los_Angeles)."""

    @model_validator(mode="after")
    def _zone_is_known(self) -> Self:
        if self.started_ago_s and (self.reset_zone is not None or self.first_reset_at is not None):
            raise ValueError(
                "started_ago_s places the first reset: not with reset_zone or first_reset_at"
            )
        if self.started_ago_s >= self.length_s:
            raise ValueError("started_ago_s must be less than length_s")
        if self.reset_zone is not None:
            try:
                ZoneInfo(self.reset_zone)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(f"unknown reset_zone {self.reset_zone!r}") from None
        return self

    @property
    def claim_name(self) -> str:
        """The representative-claim name (defaults to the window name)."""
        return self.claim or self.name


class ClockSpec(_Frozen):
    """Where the upstream's clock starts; a set `start` (or `fake`) means a FakeClock."""

    start: float | None = None
    fake: bool = False


class Scenario(_Frozen):
    """Everything that defines one simulated upstream."""

    name: str
    api: ApiKind
    quota_headers: QuotaHeaderFamily = "none"
    auth: AuthSpec = AuthSpec()
    models: tuple[ModelSpec, ...] = Field(min_length=1)
    windows: tuple[WindowSpec, ...] = ()
    clock: ClockSpec = ClockSpec()
    response: ResponseSpec = ResponseSpec()
    faults: tuple[Fault, ...] = ()
    usage_reads_per_hour: int = Field(default=30, ge=1)
    """How often the usage endpoint may be read before it answers 429."""
    usage_endpoint: UsageEndpointKind = "none"
    """Which provider's usage endpoint is served over the quota windows."""
    codex: CodexSpec | None = None
    copilot: CopilotSpec | None = None
    credits: CreditsSpec | None = None
    extra_usage: ExtraUsageSpec | None = None
    """A Claude plan's extra usage; unset, its responses carry no overage headers."""
    oauth: OAuthSpec | None = None
    """A token endpoint served next to the API (see `oauth/token_server.py`)."""
    code_assist: CodeAssistSpec | None = None
    """A Gemini Code Assist login's project and tier (`api: code-assist` only)."""
    kimi: KimiSpec | None = None
    """A Kimi Code membership and its booster wallet (`api: kimi-code` only)."""
    minimax: MiniMaxSpec | None = None
    """A MiniMax Token Plan's title and `remains` shape (`api: minimax` only)."""
    antigravity: AntigravitySpec | None = None
    """An Antigravity login's project, tier and credits (`api: antigravity` only)."""
    pool: PoolSpec | None = None
    """Several accounts of this plan, each with its own credential and staggered windows,
    served side by side by `sim.pool.SimPool` (`rungway sim-upstream` serves them all)."""

    @model_validator(mode="before")
    @classmethod
    def _subscription_logins_serve_claude_usage(cls, raw: Any) -> Any:
        # Scenarios written before `usage_endpoint` existed relied on every Claude plan
        # login (bearer auth on the Anthropic API) serving /api/oauth/usage.
        if not isinstance(raw, dict) or "usage_endpoint" in raw or raw.get("api") != "anthropic":
            return raw
        auth = raw.get("auth")
        kind = auth.kind if isinstance(auth, AuthSpec) else (auth or {}).get("kind")
        return {**raw, "usage_endpoint": "claude"} if kind == "bearer" else raw

    @model_validator(mode="before")
    @classmethod
    def _code_assist_serves_its_quota(cls, raw: Any) -> Any:
        # retrieveUserQuota is one of Code Assist's own methods (A6.1).
        if isinstance(raw, dict) and raw.get("api") == "code-assist":
            return {"usage_endpoint": "gemini", **raw}
        # So are the coding plans' usage endpoints, on their own hosts.
        if isinstance(raw, dict) and raw.get("api") in _PLAN_USAGE:
            return {"usage_endpoint": _PLAN_USAGE[raw["api"]], **raw}
        return raw

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        names = [window.name for window in self.windows]
        if len(set(names)) != len(names):
            raise ValueError(f"window names must be unique, got {names}")
        model_ids = {model.id for model in self.models}
        if len(model_ids) != len(self.models):
            raise ValueError("model ids must be unique")
        for window in self.windows:
            if window.model is not None and window.model not in model_ids:
                raise ValueError(f"window {window.name!r} is scoped to unknown model")
        self._check_provider_settings()
        return self

    def _check_provider_settings(self) -> None:
        wants_anthropic = self.usage_endpoint == "claude"
        if self.usage_endpoint != "none" and (self.api == "anthropic") != wants_anthropic:
            # The usage endpoints share their credential check with the inference API:
            # the Claude one with the Messages API, the others with the OpenAI APIs.
            needed = "anthropic" if wants_anthropic else "openai or responses"
            raise ValueError(f"usage_endpoint {self.usage_endpoint!r} needs api: {needed}")
        self._check_google_settings()
        if (self.kimi is not None and self.api != "kimi-code") or (
            self.minimax is not None and self.api != "minimax"
        ):
            raise ValueError("kimi settings need api: kimi-code, minimax settings api: minimax")
        if self.quota_headers == "codex" and self.api == "anthropic":
            raise ValueError("the codex header family decorates the openai or responses api")
        if self.codex is not None and self.codex_settings is None:
            raise ValueError("codex settings need quota_headers or usage_endpoint codex")
        if self.copilot is not None and self.usage_endpoint != "copilot":
            raise ValueError("copilot settings need usage_endpoint: copilot")
        if self.pool is not None and self.auth.kind == "none":
            raise ValueError("a pool's accounts need a credential each: give auth a token")
        if self.oauth is not None and self.auth.kind != "bearer":
            raise ValueError("oauth needs auth kind bearer: it issues bearer tokens")
        if self.credits is not None and self.usage_endpoint != "openrouter":
            raise ValueError("credits need usage_endpoint: openrouter")
        if self.extra_usage is not None and self.quota_headers != "anthropic-unified":
            raise ValueError("extra_usage needs quota_headers: anthropic-unified")
        if self.copilot is not None and self.copilot.window is not None:
            named = [w for w in self.windows if w.name == self.copilot.window]
            if not named or named[0].unit != "requests" or named[0].model is not None:
                raise ValueError("copilot.window must name an account-wide requests window")

    def _check_google_settings(self) -> None:
        if self.code_assist is not None and self.api != "code-assist":
            raise ValueError("code_assist settings need api: code-assist")
        if self.antigravity is not None and self.api != "antigravity":
            raise ValueError("antigravity settings need api: antigravity")
        if self.api not in GOOGLE_APIS:
            return
        if self.quota_headers != "none":
            # Google reports quota in error bodies and retrieveUserQuota, never in headers.
            raise ValueError(f"api {self.api!r} sends no quota headers (quota_headers: none)")
        own = "gemini" if self.api == "code-assist" else "none"
        if self.usage_endpoint not in ("none", own):
            raise ValueError("only api: code-assist serves a usage endpoint (gemini)")
        wanted = "x-api-key" if self.api == "gemini" else "bearer"
        if self.auth.kind not in (wanted, "none"):
            raise ValueError(f"api {self.api!r} takes auth kind {wanted} (or none)")

    @property
    def code_assist_settings(self) -> CodeAssistSpec | None:
        """The Code Assist login's project and tier (None unless `api: code-assist`)."""
        if self.api == "code-assist":
            return self.code_assist or CodeAssistSpec()
        return None

    @property
    def kimi_settings(self) -> KimiSpec | None:
        """The Kimi Code membership (None unless `api: kimi-code`)."""
        return (self.kimi or KimiSpec()) if self.api == "kimi-code" else None

    @property
    def minimax_settings(self) -> MiniMaxSpec | None:
        """The MiniMax Token Plan settings (None unless `api: minimax`)."""
        return (self.minimax or MiniMaxSpec()) if self.api == "minimax" else None

    @property
    def codex_settings(self) -> CodexSpec | None:
        """The ChatGPT plan settings of a Codex-family scenario (None for any other)."""
        if self.quota_headers == "codex" or self.usage_endpoint == "codex":
            return self.codex or CodexSpec()
        return None

    @property
    def copilot_settings(self) -> CopilotSpec | None:
        """The Copilot seat settings when the Copilot usage endpoint is served."""
        if self.usage_endpoint == "copilot":
            return self.copilot or CopilotSpec()
        return None

    @property
    def credit_settings(self) -> CreditsSpec | None:
        """The credit limit when the upstream is OpenRouter (unlimited unless set)."""
        if self.usage_endpoint == "openrouter":
            return self.credits or CreditsSpec()
        return None

    def soft_windows(self) -> frozenset[str]:
        """Windows that keep serving past their capacity, billing what is past it: a
        Copilot seat's premium window with overage permitted (A5.3), a Claude plan's
        account-wide windows with extra usage (A2.3), a ChatGPT plan's with credits (A4.3)."""
        credits = self.antigravity.credits if self.antigravity is not None else None
        if credits is not None and credits.balance:
            # Antigravity's credits pay past a model's spent bucket (sim/wire/antigravity.py
            # serves that only to requests that ask for it).
            return frozenset(window.name for window in self.windows)
        if self.kimi_settings is not None and self.kimi_settings.booster_serving:
            # Kimi's booster wallet pays for requests past its plan's spent windows.
            return frozenset(window.name for window in self.windows if window.model is None)
        premium = self.premium_window()
        copilot = self.copilot_settings
        if premium is not None and copilot is not None and copilot.overage_permitted:
            return frozenset({premium.name})
        codex = self.codex_settings
        billed = (self.extra_usage is not None and self.extra_usage.serving) or (
            codex is not None and (codex.credits.has_credits or codex.credits.unlimited)
        )
        if billed:
            return frozenset(window.name for window in self.windows if window.model is None)
        return frozenset()

    def premium_window(self) -> WindowSpec | None:
        """A Copilot seat's premium-request window (None when unlimited or not Copilot)."""
        settings = self.copilot_settings
        if settings is None:
            return None
        for window in self.windows:
            if settings.window is None and window.unit == "requests" and window.model is None:
                return window
            if window.name == settings.window:
                return window
        return None

    def model(self, model_id: str) -> ModelSpec | None:
        """The served model with this id, if any."""
        for model in self.models:
            if model.id == model_id:
                return model
        return None


def load_scenario(path: Path | str) -> Scenario:
    """Read and validate a scenario YAML file."""
    with Path(path).open(encoding="utf-8") as handle:
        raw = yaml.safe_load(handle)
    return Scenario.model_validate(raw)


def builtin_scenario(name: str) -> Path:
    """Path of a scenario shipped with rungway (`claude-plan`, `cheap-openai`, ...)."""
    stem = name.removesuffix(".yaml")
    path = Path(str(resources.files("rungway.sim") / "scenarios" / f"{stem}.yaml"))
    if not path.is_file():
        available = ", ".join(builtin_scenario_names())
        raise FileNotFoundError(f"no built-in scenario {name!r}; available: {available}")
    return path


def builtin_scenario_names() -> list[str]:
    """Names of the scenarios shipped with rungway."""
    folder = Path(str(resources.files("rungway.sim") / "scenarios"))
    return sorted(path.stem for path in folder.glob("*.yaml"))
