"""The config's sections besides its connections: client keys, the server, upstream
timeouts, quota polling, the admin API, the ledger, the live state, billing entries and
capability rows."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rungway.config.refs import NAME, CredentialRef
from rungway.models.capabilities import ModelCapabilities, Structured
from rungway.protocol.auth import Auth
from rungway.routing.autoid import Category
from rungway.routing.billing import BillingClass, Overage


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


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
