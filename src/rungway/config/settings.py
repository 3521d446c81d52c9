"""`Settings`, the whole configuration: its sections, connections, aliases and client keys,
checked together (unique ids, aliases that resolve once, client keys that exist)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rungway.config.connections import ConnectionConfig
from rungway.config.refs import CredentialStoreSettings
from rungway.config.sections import (
    AdminSettings,
    BillingEntryConfig,
    CapabilityConfig,
    ClientKeyConfig,
    LedgerSettings,
    QuotaSettings,
    ServerSettings,
    StateSettings,
    TimeoutSettings,
)
from rungway.models.capabilities import ModelCapabilities
from rungway.pricing import PriceOverride, TierSettings
from rungway.routing.autoid import BadAutoId, Category, is_auto_id, parse_auto_id
from rungway.routing.settings import LadderSettings


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


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
