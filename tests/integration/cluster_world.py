"""Several gateway processes in one test: each a RedisLink, a Redis state store and a board
on one prefix of the real Redis."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from rungway.clock import Clock
from rungway.cluster.link import RedisLink
from rungway.cluster.state import RedisStateStore
from rungway.quota.board import QuotaBoard
from rungway.routing.settings import LadderSettings
from tests.services import REDIS_URL

CONNECTIONS = ("plan", "api", "cheap")


@dataclass
class Replica:
    """One process's share of the cluster: its link, store and board."""

    link: RedisLink
    store: RedisStateStore
    board: QuotaBoard

    async def stop(self) -> None:
        await self.store.stop()
        await self.link.close()


async def replica(
    prefix: str,
    clock: Clock,
    settings: LadderSettings,
    *,
    url: str = REDIS_URL,
    name: str = "",
    known: Collection[str] = CONNECTIONS,
) -> Replica:
    """A started replica on `prefix`, joined if Redis answers at `url`."""
    link = RedisLink(url, prefix, timeout_s=0.5, retry_s=0.05)
    store = RedisStateStore(link, clock, origin=name or None)
    board = QuotaBoard(settings, store=store)
    store.attach(board, known)
    await link.start()
    return Replica(link, store, board)


async def eventually(check: Callable[[], bool], within_s: float = 3.0) -> None:
    """Wait until `check()` holds; fail the test if it does not within `within_s`."""
    deadline = time.monotonic() + within_s
    while not check():
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.005)
