"""Typed, frozen settings: one YAML file, validated once when the gateway starts.

Secrets are never written in the file itself: a credential names an environment variable, a
file or the encrypted store, and `credentials.secrets` reads it, once. A bad file raises
`ConfigError` naming the file, the key and the problem, so `rungway serve` can refuse to
start with a message that says what to fix.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from rungway.egress import BadProxy, is_direct, parse_proxy
from rungway.models.capabilities import ModelCapabilities, Structured
from rungway.pricing import PriceOverride, TierSettings
from rungway.protocol.auth import Auth
from rungway.routing.autoid import BadAutoId, Category, is_auto_id, parse_auto_id
from rungway.routing.billing import BillingClass, Overage
from rungway.routing.settings import LadderSettings

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

NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CredentialRef(_Frozen):
    """Where a secret lives: an environment variable, a file, or the encrypted credential
    store (`rungway connections import`), never the config itself."""

    env: str | None = None
    file: Path | None = None
    store: Annotated[str, Field(pattern=NAME, max_length=64)] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> CredentialRef:
        given = [self.env, self.file, self.store]
        if sum(value is not None for value in given) != 1:
            raise ValueError(
                "give exactly one of `env` (a variable name), `file` (a path) or `store` "
                "(the name of an imported credential)"
            )
        return self


class StoreKeyRef(_Frozen):
    """Where the credential store's key lives: an environment variable or a key file."""

    env: str | None = None
    file: Path | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> StoreKeyRef:
        if (self.env is None) == (self.file is None):
            raise ValueError("give exactly one of `env` (a variable name) or `file` (a path)")
        return self


class CredentialStoreSettings(_Frozen):
    """The encrypted store of imported logins; by default next to the ledger, with its key
    from `RUNGWAY_CREDENTIALS_KEY` or else a key file created 0600 on first use."""

    path: Path | None = None
    key: StoreKeyRef | None = None


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


class ClientKeyConfig(_Frozen):
    """A key that clients present to the gateway, with a name for the ledger and its limits."""

    name: Annotated[str, Field(pattern=NAME, max_length=64)]
    key: CredentialRef
    budget_usd: Annotated[float, Field(ge=0)] | None = None
    """Incremental spend this key may cause per `budget_period`; absent means no limit."""
    budget_period: Literal["day", "week", "month"] = "month"
    requests_per_minute: Annotated[int, Field(ge=1)] | None = None
    """Requests this key may start in any 60 seconds; absent means no limit."""


class ServerSettings(_Frozen):
    """Where the gateway listens and what it accepts."""

    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 4141
    max_body_bytes: Annotated[int, Field(ge=1024)] = 16 * 1024 * 1024
    header_timeout_s: Annotated[float, Field(gt=0)] = 10.0
    """From a connection's start, or a request's first byte, to the end of its headers."""
    body_timeout_s: Annotated[float, Field(gt=0)] = 60.0
    """From the end of a request's headers to the end of its body."""
    max_header_bytes: Annotated[int, Field(ge=1024)] = 64 * 1024
    max_headers: Annotated[int, Field(ge=1)] = 100
    max_connections_per_client: Annotated[int, Field(ge=1)] = 256
    """Open connections from one client address at once."""


class TimeoutSettings(_Frozen):
    """Upstream timeouts, in seconds."""

    connect_s: Annotated[float, Field(gt=0)] = 10.0
    first_byte_s: Annotated[float, Field(gt=0)] = 300.0
    idle_s: Annotated[float, Field(gt=0)] = 120.0
    first_content_s: Annotated[float, Field(gt=0)] = 300.0
    """From a stream's response headers to its first content a user would see; keep-alive
    pings and empty opening events do not count. Past it the stream falls through."""
    max_stream_s: Annotated[float, Field(gt=0)] = 3600.0
    """The longest a stream is relayed; past it, it ends with the API's error event."""


class QuotaSettings(_Frozen):
    """Polling of plan usage endpoints."""

    poll_interval_s: Annotated[float, Field(ge=0)] = 300.0
    """Background polling interval per connection (and once after each reset); 0 turns it off."""
    inline_deadline_s: Annotated[float, Field(gt=0, le=30)] = 2.0
    """How long `auto/subscription` may wait to verify a plan with no fresh reading."""


class AdminSettings(_Frozen):
    """The admin API (`/admin/`): without a key it answers only on loopback."""

    key: CredentialRef | None = None


class PostgresSettings(_Frozen):
    """A PostgreSQL database the ledger's rows drain into, shared by every replica."""

    dsn: str | CredentialRef
    """`postgresql://user@host:port/db`; a DSN with a password belongs in `{env: VAR}` or
    `{file: PATH}`, never in the file itself."""
    db_schema: Annotated[
        str, Field(alias="schema", pattern=r"^[a-z_][a-z0-9_]*$", max_length=63)
    ] = "public"
    """The schema the ledger's tables live in."""


class LedgerSettings(_Frozen):
    """Where the request ledger is kept: a SQLite file, by default under the user's data
    directory; with `postgres`, that file is this process's journal and its rows drain
    into PostgreSQL, where every report reads them."""

    path: Path | None = None
    postgres: PostgresSettings | None = None


class RedisSettings(_Frozen):
    """A Redis server that shares live state, budgets and rate windows between processes."""

    url: str | CredentialRef = "redis://127.0.0.1:6379/0"
    """`redis://[user:password@]host:port/db`; one with a password belongs in `{env: VAR}`
    or `{file: PATH}`."""
    prefix: Annotated[str, Field(pattern=NAME, max_length=64)] = "rungway"
    """Every key starts with `<prefix>:`, so several gateways (or test runs) share one Redis."""
    timeout_s: Annotated[float, Field(gt=0, le=10)] = 0.5
    """How long one Redis command may take before the store counts as unreachable."""


class StateSettings(_Frozen):
    """Where the live state (readings, cooldowns, breakers, disables; with Redis, also
    budget holds and rate windows) is kept: `embedded`, a SQLite file beside the ledger, for
    one process; `redis`, shared by every worker and replica; or `memory`, forgotten."""

    store: Literal["embedded", "memory", "redis"] = "embedded"
    path: Path | None = None
    """The embedded store's file; by default `<ledger>.state` beside the ledger."""
    redis: RedisSettings | None = None
    """Required with `store: redis`."""

    @model_validator(mode="after")
    def _redis_named(self) -> StateSettings:
        if self.store == "redis" and self.redis is None:
            raise ValueError("`store: redis` needs a `redis:` section with at least its `url`")
        if self.store != "redis" and self.redis is not None:
            raise ValueError(
                f"a `redis:` section is set but `store` is {self.store!r}; set `store: redis`"
            )
        return self


class BillingEntryConfig(_Frozen):
    """An operator's billing catalog entry; it wins over the built-in ones."""

    provider: Annotated[str, Field(min_length=1)]
    auth: Auth | None = None
    billing: BillingClass
    overage: Overage | Literal["live"]
    reason: Annotated[str, Field(min_length=1)]


class CapabilityConfig(_Frozen):
    """A `capabilities:` row in its long form: the model's categories and what it can do.

    A field left out keeps what the built-in table says (unknown when it says nothing)."""

    categories: tuple[Category, ...] = ()
    vision: bool | None = None
    tools: bool | None = None
    reasoning: bool | None = None
    structured_output: Structured | None = None
    context_window: Annotated[int, Field(gt=0)] | None = None
    max_output: Annotated[int, Field(gt=0)] | None = None

    def capabilities(self) -> ModelCapabilities:
        """The row as the capability table takes it."""
        return ModelCapabilities(
            vision=self.vision,
            tools=self.tools,
            reasoning=self.reasoning,
            structured=self.structured_output,
            context_window=self.context_window,
            max_output=self.max_output,
        )


class Settings(_Frozen):
    """The whole configuration."""

    server: ServerSettings = ServerSettings()
    ladder: LadderSettings = LadderSettings()
    tiers: TierSettings = TierSettings()
    prices: dict[Annotated[str, Field(min_length=1)], PriceOverride] = Field(default_factory=dict)
    """Per-model prices per million tokens (`provider/glob` or `glob`) over the list prices:
    what a model without a list price costs to the budgets, the ledger and its tier."""
    billing: tuple[BillingEntryConfig, ...] = ()
    capabilities: dict[str, tuple[Category, ...] | CapabilityConfig] = Field(default_factory=dict)
    """Rows over the built-in tables, by model glob: a list of categories, or the long form
    with categories and capabilities."""
    timeouts: TimeoutSettings = TimeoutSettings()
    ledger: LedgerSettings = LedgerSettings()
    state: StateSettings = StateSettings()
    quota: QuotaSettings = QuotaSettings()
    admin: AdminSettings = AdminSettings()
    credentials: CredentialStoreSettings = CredentialStoreSettings()
    connections: tuple[ConnectionConfig, ...]
    aliases: dict[str, str] = Field(default_factory=dict)
    client_keys: tuple[ClientKeyConfig, ...] = ()

    @field_validator("aliases")
    @classmethod
    def _aliases_resolve_once(cls, aliases: dict[str, str]) -> dict[str, str]:
        for name, target in aliases.items():
            if not target:
                raise ValueError(f"alias {name!r} maps to an empty name")
            if is_auto_id(target):
                try:
                    parse_auto_id(target)
                except BadAutoId as error:
                    raise ValueError(f"alias {name!r}: {error}") from None
            if target in aliases:
                raise ValueError(
                    f"alias {name!r} maps to {target!r}, which is itself an alias; "
                    "map it to the final name directly"
                )
        return aliases

    @model_validator(mode="after")
    def _unique_ids(self) -> Settings:
        if not self.connections:
            raise ValueError("`connections` is empty; add at least one connection")
        seen: set[str] = set()
        for index, connection in enumerate(self.connections):
            if connection.id in seen:
                raise ValueError(
                    f"connections[{index}].id {connection.id!r} is used twice; ids must be unique"
                )
            seen.add(connection.id)
        names = [key.name for key in self.client_keys]
        if len(names) != len(set(names)):
            raise ValueError("client_keys: every key needs a distinct `name`")
        for index, connection in enumerate(self.connections):
            if connection.client_key is not None and connection.client_key not in names:
                raise ValueError(
                    f"connections[{index}].client_key {connection.client_key!r} names no "
                    f"key in client_keys ({', '.join(names) or 'none configured'})"
                )
        return self


def category_rows(settings: Settings) -> dict[str, frozenset[Category]]:
    """The configured `capabilities:` rows as the category table takes them."""
    return {
        pattern: frozenset(row if isinstance(row, tuple) else row.categories)
        for pattern, row in settings.capabilities.items()
    }


def capability_rows(settings: Settings) -> dict[str, ModelCapabilities]:
    """The configured long-form `capabilities:` rows as the capability table takes them."""
    return {
        pattern: row.capabilities()
        for pattern, row in settings.capabilities.items()
        if isinstance(row, CapabilityConfig)
    }


class ConfigError(Exception):
    """The configuration cannot be used; the message names the file, the key and the problem."""


def load_settings(path: Path) -> Settings:
    """Read and validate the YAML file at `path`."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the config file: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    return parse_settings(raw, source=str(path))


def parse_settings(raw: Any, source: str = "<config>") -> Settings:
    """Validate an already-parsed config document."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping with a `connections` list")
    try:
        return Settings.model_validate(raw)
    except ValidationError as error:
        problems = "\n".join(
            f"  {_dotted(issue['loc']) or '(top level)'}: {_clean(issue['msg'])}"
            for issue in error.errors()
        )
        raise ConfigError(f"{source}: invalid configuration\n{problems}") from None


def check_bind(host: str, settings: Settings) -> None:
    """Refuse a non-loopback bind address when no client keys protect the gateway."""
    if settings.client_keys or is_loopback(host):
        return
    raise ConfigError(
        f"server.host {host!r}: refusing to listen beyond this machine without client keys; "
        "add `client_keys` to the config or bind to 127.0.0.1"
    )


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _dotted(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in {
            "function-after[_exactly_one()]",
            "function-after[_credential_matches_auth()]",
        }:
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


def _clean(message: str) -> str:
    return message.removeprefix("Value error, ")
