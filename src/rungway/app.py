"""Composition: the one place that knows every concrete class."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import platformdirs
from pydantic import SecretStr

from rungway.adapters.base import Connection
from rungway.adapters.registry import provider_entry
from rungway.config import Settings
from rungway.engine.dispatch import Engine
from rungway.engine.upstream import UpstreamClient
from rungway.ledger.memory import MemoryLedger
from rungway.ledger.sqlite import SqliteLedger
from rungway.routing.resolve import ConnectionFacts, ModelTable
from rungway.server.app import GatewayApp
from rungway.server.auth import ClientKeys


def default_ledger_path() -> Path:
    """The ledger file under the user's data directory."""
    return platformdirs.user_data_path("rungway") / "ledger.sqlite3"


@dataclass(frozen=True, slots=True)
class Gateway:
    """A built gateway: the ASGI app and the ledger it writes to."""

    app: GatewayApp
    ledger: SqliteLedger | MemoryLedger


def build_gateway(
    settings: Settings, secrets: dict[str, SecretStr], *, ledger: MemoryLedger | None = None
) -> Gateway:
    """Wire settings and secrets into a ready-to-serve gateway."""
    connections = {
        config.id: Connection(
            id=config.id,
            provider=config.provider,
            auth=config.auth,
            secret=secrets.get(f"connection:{config.id}"),
            base_url=_base_url(config.base_url, config.provider),
            models=frozenset(config.models),
        )
        for config in settings.connections
    }
    table = ModelTable(
        (ConnectionFacts(c.id, c.provider, c.models) for c in connections.values()),
        settings.aliases,
    )
    store = ledger or SqliteLedger(settings.ledger.path or default_ledger_path())
    client = UpstreamClient(settings.timeouts)
    engine = Engine(
        table, connections, lambda provider: provider_entry(provider).adapter, client, store
    )
    keys = ClientKeys({key.name: secrets[f"client:{key.name}"] for key in settings.client_keys})

    async def shutdown() -> None:
        await client.close()
        store.close()

    app = GatewayApp(engine, keys, settings.server.max_body_bytes, client.start, shutdown)
    return Gateway(app, store)


def _base_url(configured: str | None, provider: str) -> str:
    url = configured or provider_entry(provider).default_base_url
    assert url is not None, "config validation requires base_url for custom providers"
    return url.rstrip("/")
