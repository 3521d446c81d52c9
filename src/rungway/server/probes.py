"""The gateway's probes: `/healthz` (is this process well) and `/readyz` (may it take traffic).

`/healthz` lists each shared store (Redis, PostgreSQL), up or degraded; a degraded store
still answers 200, since the gateway serves on what it can reach. A stopped ledger writer
is another matter: the process answers requests but records none of them, which only a
restart mends (its money journal then replays what was settled), so `/healthz` answers 503
with status `failing` and names it.

`/readyz` answers 200 once the config is loaded and the stores the gateway cannot serve
without are up, and 503 naming each that is not. Today that is the ledger writer: Redis and
PostgreSQL are not among them, since the gateway serves without them by design (budgeted
paid rungs refuse while Redis is away; rows wait in the ledger file for PostgreSQL), and a
shared store that is down for every replica must not take every replica out of service.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from rungway.cluster.health import HealthOf
from rungway.protocol.asgi import Receive, Scope, Send
from rungway.server.asgi import send_reply

StoppedWriter = Callable[[], str | None]
"""Why the ledger writer has stopped, or None while it writes."""
_JSON = [("content-type", "application/json"), ("cache-control", "no-store")]


class Probes:
    """The `/healthz` and `/readyz` handlers over the stores' health and the ledger's."""

    def __init__(self, health: HealthOf, stopped_writer: StoppedWriter) -> None:
        self._health_of = health
        self._stopped_writer = stopped_writer

    async def health(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`/healthz`: ok, degraded (a shared store is down) or failing (the writer stopped)."""
        stores = [
            {"store": each.store, "up": each.up, "detail": each.detail}
            for each in self._health_of()
        ]
        stopped = self._stopped_writer()
        body: dict[str, Any] = {"status": "ok" if all(s["up"] for s in stores) else "degraded"}
        if stopped is not None:
            body = {"status": "failing", "ledger": stopped}
        if stores:
            body["stores"] = stores
        status = 503 if stopped is not None else 200
        await send_reply(send, status, list(_JSON), orjson.dumps(body))

    async def ready(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`/readyz`: 200 when the gateway can serve and record, 503 naming what is down."""
        stopped = self._stopped_writer()
        if stopped is None:
            await send_reply(send, 200, list(_JSON), b'{"status":"ready"}')
            return
        body = {"status": "not_ready", "down": [{"component": "ledger", "detail": stopped}]}
        await send_reply(send, 503, list(_JSON), orjson.dumps(body))
