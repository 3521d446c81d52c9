"""Composition: the one place that knows every concrete class."""

from __future__ import annotations

import gc
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

    async def startup() -> None:
        await client.start()
        settle_heap()

    async def shutdown() -> None:
        await client.close()
        store.close()

    app = GatewayApp(engine, keys, settings.server.max_body_bytes, startup, shutdown)
    return Gateway(app, store)


def settle_heap() -> None:
    """Move everything alive after start-up out of the garbage collector's sight.

    Start-up leaves hundreds of thousands of long-lived objects (pydantic models, aiohttp,
    uvicorn); a full collection walking them all stalls every request for milliseconds.
    Frozen, they are never scanned again, and a larger young generation makes collections
    rarer: the gateway's p99 at concurrency 16 drops from about 16 ms to about 5 ms.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(7000, 20, 20)


def _base_url(configured: str | None, provider: str) -> str:
    url = configured or provider_entry(provider).default_base_url
    assert url is not None, "config validation requires base_url for custom providers"
    return url.rstrip("/")
