"""Typed, frozen settings: one YAML file, validated once when the gateway starts.

Secrets are never written in the file itself: a credential names an environment variable, a
file or the encrypted store, and `credentials.secrets` reads it, once. A bad file raises
`ConfigError` naming the file, the key and the problem, so `rungway serve` can refuse to
start with a message that says what to fix.

The parts: `refs` (where secrets live), `connections` (the providers and one account at
each), `sections` (the other sections), `settings` (the whole, checked together) and
`loading` (the file read, validated and its errors told). Every name is imported from here.
"""

from rungway.config.connections import PROVIDERS, ConnectionConfig, Provider
from rungway.config.loading import (
    ConfigError,
    check_bind,
    is_loopback,
    load_settings,
    parse_settings,
)
from rungway.config.refs import NAME, CredentialRef, CredentialStoreSettings, StoreKeyRef
from rungway.config.sections import (
    AdminSettings,
    BillingEntryConfig,
    CapabilityConfig,
    ClientKeyConfig,
    LedgerSettings,
    PostgresSettings,
    QuotaSettings,
    RedisSettings,
    ServerSettings,
    StateSettings,
    TimeoutSettings,
)
from rungway.config.settings import Settings, capability_rows, category_rows

__all__ = [
    "NAME",
    "PROVIDERS",
    "AdminSettings",
    "BillingEntryConfig",
    "CapabilityConfig",
    "ClientKeyConfig",
    "ConfigError",
    "ConnectionConfig",
    "CredentialRef",
    "CredentialStoreSettings",
    "LedgerSettings",
    "PostgresSettings",
    "Provider",
    "QuotaSettings",
    "RedisSettings",
    "ServerSettings",
    "Settings",
    "StateSettings",
    "StoreKeyRef",
    "TimeoutSettings",
    "capability_rows",
    "category_rows",
    "check_bind",
    "is_loopback",
    "load_settings",
    "parse_settings",
]
