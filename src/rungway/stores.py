"""Composition of what a gateway keeps beyond one request: its ledgers, its budgets, the
quota board's state store and, in a cluster, its Redis link; and the order in which they
start and stop.

A lone gateway keeps everything in SQLite files beside its ledger. With `state.store:
redis` the board's state, the budgets, rate windows and usage-poll claims go through one
`RedisLink`; with `ledger.postgres` the local ledger's rows drain into PostgreSQL, which
answers every report. Only `app.py` uses this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs
from pydantic import SecretStr

from rungway.budget import KeyBudget, LocalBudget
from rungway.clock import Clock
from rungway.cluster.health import StoreHealth
from rungway.config import Settings
from rungway.ledger.memory import MemoryLedger
from rungway.ledger.sqlite import SqliteLedger
from rungway.ledger.unrecorded import unrecorded_since
from rungway.quota.embedded import open_state_store, state_path
from rungway.quota.store import MemoryStateStore, StateStore

if TYPE_CHECKING:
    # Imported where a cluster is configured: redis and asyncpg cost ~70 ms of every start.
    from rungway.cluster.budget import RedisBudget
    from rungway.cluster.link import RedisLink
    from rungway.ledger.postgres import PostgresLedger


def default_ledger_path() -> Path:
    """The ledger file under the user's data directory."""
    return platformdirs.user_data_path("rungway") / "ledger.sqlite3"


@dataclass(frozen=True, slots=True)
class Stores:
    """A gateway's ledgers, budgets and shared-store link."""

    ledger: SqliteLedger | MemoryLedger
    """The local ledger: every row is written here first (with its money journal)."""
    postgres: PostgresLedger | None
    """The cluster's ledger the local rows drain into, which answers the reports."""
    link: RedisLink | None
    """The cluster's shared Redis (None for a lone gateway)."""
    budget: LocalBudget | RedisBudget
    ledger_existed: bool
    """Whether the local ledger's file was there before this process opened it."""

    def state_store(self, settings: Settings) -> StateStore:
        """The quota board's own store when its state is not shared through Redis."""
        # The embedded store follows a ledger on disk; a ledger in memory (a test's) keeps
        # the quota state in memory too unless the config names a file for it.
        path = settings.state.path
        if path is None and isinstance(self.ledger, SqliteLedger):
            path = state_path(self.ledger.path)
        if settings.state.store == "memory" or path is None:
            return MemoryStateStore()
        return open_state_store(path.expanduser(), expected=self.ledger_existed)

    async def start(self, now: float) -> None:
        """Start draining to PostgreSQL, then the budgets, then the link; never raises
        when PostgreSQL or Redis is unreachable."""
        if self.postgres is not None:
            # Before the link: the link's join seeds the shared budgets' spend from it.
            await self.postgres.start()
        if isinstance(self.budget, LocalBudget):
            # This period's settled spend is read now, not on the first request.
            self.budget.prime(now)
        else:
            # It queues its crash rows' cost; the link's join seeds and sends it.
            await self.budget.start()
        if self.link is not None:
            await self.link.start()

    async def stop(self) -> None:
        """Send the settles that wait, close the link, send the rows that wait to
        PostgreSQL (within a short deadline), then close the local ledger."""
        if not isinstance(self.budget, LocalBudget):
            await self.budget.close()
        if self.link is not None:
            await self.link.close()
        if self.postgres is not None:
            await self.postgres.stop()
        self.ledger.close()

    def health(self) -> list[StoreHealth]:
        """Each shared store's health (none for a lone gateway)."""
        stores = [self.link.health()] if self.link is not None else []
        return stores + ([self.postgres.health()] if self.postgres is not None else [])


def open_stores(
    settings: Settings,
    secrets: dict[str, SecretStr],
    *,
    ledger: MemoryLedger | None,
    clock: Clock,
    worker: int,
) -> Stores:
    """The stores the config names; `ledger` replaces the local one (a test's), `worker`
    numbers the process among `serve --workers`."""
    if ledger is not None:
        local: SqliteLedger | MemoryLedger = ledger
        existed = False
    else:
        path = settings.ledger.path or default_ledger_path()
        existed = path.exists()
        local = SqliteLedger(path, worker=worker, outbox=settings.ledger.postgres is not None)
    postgres = _postgres(settings, secrets, local)
    link = _redis_link(settings, secrets)
    return Stores(local, postgres, link, _budget(settings, local, postgres, link, clock), existed)


def _postgres(
    settings: Settings, secrets: dict[str, SecretStr], local: SqliteLedger | MemoryLedger
) -> PostgresLedger | None:
    postgres = settings.ledger.postgres
    if postgres is None or not isinstance(local, SqliteLedger):
        return None
    from rungway.ledger.postgres import PostgresLedger  # noqa: PLC0415 - only with a cluster

    # Reports read the cluster's ledger; rows, the journal and the budget stay local.
    return PostgresLedger(local, secrets["postgres"].get_secret_value(), postgres.db_schema)


def _redis_link(settings: Settings, secrets: dict[str, SecretStr]) -> RedisLink | None:
    redis = settings.state.redis
    if settings.state.store != "redis" or redis is None:
        return None
    from rungway.cluster.link import RedisLink  # noqa: PLC0415 - only with a cluster

    return RedisLink(secrets["redis"].get_secret_value(), redis.prefix, timeout_s=redis.timeout_s)


def _budget(
    settings: Settings,
    store: SqliteLedger | MemoryLedger,
    postgres: PostgresLedger | None,
    link: RedisLink | None,
    clock: Clock,
) -> LocalBudget | RedisBudget:
    """The budgets: this process's own, or, with a shared Redis, the cluster's."""
    keys = [
        KeyBudget(key.name, key.budget_usd, key.budget_period)
        for key in settings.client_keys
        if key.budget_usd is not None
    ]
    # A SQLite ledger journals reservations; those a crash left open it has already
    # turned into `unrecorded` rows, which the budget reads as spend.
    log = store if isinstance(store, SqliteLedger) else None
    if link is None:
        return LocalBudget(settings.ladder, store.spent_since, keys=keys, log=log)
    from rungway.cluster.budget import RedisBudget  # noqa: PLC0415 - only with a cluster
    from rungway.cluster.budget_changes import (  # noqa: PLC0415 - only with a cluster
        PendingChanges,
        pending_path,
    )

    # Shared spend is seeded from the cluster's ledger where there is one; the crash rows
    # whose cost must reach it are this process's own.
    return RedisBudget(
        settings.ladder,
        link,
        (postgres or store).spent_since,
        clock=clock,
        keys=keys,
        log=log,
        unrecorded=(
            partial(unrecorded_since, store.path) if isinstance(store, SqliteLedger) else None
        ),
        # What waits for Redis is kept beside the ledger's journal, one file per worker.
        pending=(
            PendingChanges(pending_path(store.journal.path))
            if isinstance(store, SqliteLedger)
            else None
        ),
    )
