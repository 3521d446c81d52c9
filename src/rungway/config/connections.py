"""The connections section: the providers with an adapter, and one account at a provider
as written in the config file, with its credential, proxy, clients and client key."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rungway.config.refs import NAME, CredentialRef
from rungway.egress import BadProxy, is_direct, parse_proxy
from rungway.protocol.auth import Auth

Provider = Literal[
    "anthropic",
    "anthropic-compatible",
    "antigravity",
    "codex",
    "copilot",
    "deepseek",
    "gemini",
    "gemini-code-assist",
    "glm-coding",
    "glm-coding-anthropic",
    "groq",
    "kimi-code",
    "kimi-code-openai",
    "minimax-token-plan",
    "ollama",
    "openai",
    "openai-compatible",
    "openai-responses",
    "openrouter",
]
"""Providers with an adapter in this release; `adapters/registry.py` maps each to its API."""

PROVIDERS: tuple[str, ...] = get_args(Provider)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ConnectionConfig(_Frozen):
    """One account at a provider, as written in the config file."""

    id: Annotated[str, Field(pattern=NAME, max_length=64)]
    provider: Provider
    auth: Auth
    credential: CredentialRef | None = None
    base_url: Annotated[str, Field(pattern=r"^https?://[^\s]+$")] | None = None
    usage_base_url: Annotated[str, Field(pattern=r"^https?://[^\s]+$")] | None = None
    """Where the usage endpoint lives when not on the provider's usual host (Copilot's)."""
    token_url: Annotated[str, Field(pattern=r"^https?://[^\s]+$")] | None = None
    """Where a stored login renews its access token (the provider's own endpoint if unset)."""
    project: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{4,61}[a-z0-9]$")] | None = None
    """The Google Cloud project a Gemini Code Assist login works in, for the tiers that need
    one named (the Gemini CLI's `GOOGLE_CLOUD_PROJECT`); found with `loadCodeAssist` if unset."""
    credits: bool = False
    """An Antigravity login spends its Google One AI credits past its quota: the
    connection then meters to paid, and `auto/subscription` leaves it out."""
    models: Annotated[tuple[Annotated[str, Field(min_length=1)], ...], Field(min_length=1)]
    proxy: str | CredentialRef | None = None
    """The proxy this connection's model calls, token renewals and usage reads go through:
    `http://[user:password@]host:port`, `socks5://…` or `socks5h://…` (the proxy resolves
    names), or `direct` for none; a URL with a password is better read from `{env: VAR}` or
    `{file: PATH}`. Unset, the environment's `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` and
    `NO_PROXY` decide (`rungway.egress`)."""
    clients: Literal["terms", "any"] = "terms"
    """Which clients a plan connection serves: `terms`, only those its plan's terms allow
    (the billing catalog's `terms.clients`; Claude plans: Claude Code); `any`, every
    client, the operator's choice past those terms, shown wherever the connection is."""
    client_key: Annotated[str, Field(pattern=NAME, max_length=64)] | None = None
    """The one client key (`client_keys[].name`) this connection serves, for a plan that is
    one person's; requests made with any other key skip it."""
    owner: Annotated[str, Field(pattern=NAME, max_length=64)] | None = None
    """Whose account this is: the connections of one plan and one owner form a pool, which
    `ladder.pool_strategy` orders; a pool never mixes owners. Unset, the `client_key`
    stands for the owner (and with neither, the plan's connections share one pool)."""

    @property
    def pool_owner(self) -> str | None:
        """The owner a pool is keyed by: `owner`, else the bound `client_key`."""
        return self.owner if self.owner is not None else self.client_key

    @field_validator("proxy")
    @classmethod
    def _proxy_usable(cls, proxy: str | CredentialRef | None) -> str | CredentialRef | None:
        if proxy is None:
            return None
        if isinstance(proxy, CredentialRef):
            if proxy.store is not None:
                raise ValueError("a proxy URL is read from `env` or `file`, not the store")
            return proxy
        if is_direct(proxy):
            return "direct"
        try:
            parse_proxy(proxy)
        except BadProxy as error:
            # The message masks the password; the input is never echoed with it.
            raise ValueError(f"{error}; or `direct` for no proxy") from None
        return proxy.strip()

    @model_validator(mode="after")
    def _credential_matches_auth(self) -> ConnectionConfig:
        if self.auth is Auth.NONE and self.credential is not None:
            raise ValueError("auth `none` takes no credential; remove `credential` or set auth")
        if self.auth is not Auth.NONE and self.credential is None:
            raise ValueError(
                f"auth `{self.auth}` needs a `credential` "
                "({env: VAR}, {file: PATH} or {store: NAME})"
            )
        if self.provider.endswith("-compatible") and self.base_url is None:
            raise ValueError(f"provider `{self.provider}` needs a `base_url`")
        if self.project is not None and self.provider != "gemini-code-assist":
            raise ValueError("`project` names a Gemini Code Assist login's Google Cloud project")
        if self.credits and self.provider != "antigravity":
            raise ValueError("`credits` spends an Antigravity login's AI credits")
        return self
