"""What a shared budget's hold costs the request path: one `RedisBudget.reserve`, timed.

Each reserve is the Lua script's one round trip to the local Redis (check the rung's and a
client key's budgets, drop expired holds, add the hold); its release goes to the
background sender, as a request's settle does. `LocalBudget.reserve` is timed beside it.

    python bench/budget_reserve.py [--count N]
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import secrets
import statistics
import sys
import time

import redis

from rungway.budget import KeyBudget, LocalBudget, Reservation
from rungway.budget.local import Grouping
from rungway.clock import SystemClock
from rungway.cluster.budget import RedisBudget
from rungway.cluster.link import RedisLink
from rungway.routing.rungs import Rung
from rungway.routing.settings import LadderSettings

SETTINGS = LadderSettings(rung_budget_usd={"cheap": 1_000_000.0, "premium": None})
KEYS = (KeyBudget("alice", 1_000_000.0, "day"),)


def _nothing_spent(since: float, by: Grouping) -> dict[str, float]:
    return {}


async def _timed(budget: LocalBudget | RedisBudget, count: int) -> list[float]:
    spans = []
    for _ in range(count):
        started = time.perf_counter()
        held = await budget.reserve(Rung.CHEAP, "alice", 0.001, time.time())
        spans.append(time.perf_counter() - started)
        assert isinstance(held, Reservation), held
        budget.release(held)
        if isinstance(budget, RedisBudget) and budget.pending > 256:
            await budget.flush()
    return spans


async def _run(url: str, count: int) -> dict[str, list[float]]:
    prefix = f"rwbench-{secrets.token_hex(4)}"
    link = RedisLink(url, prefix)
    shared = RedisBudget(SETTINGS, link, _nothing_spent, clock=SystemClock(), keys=KEYS)
    await shared.start()
    await link.start()
    try:
        await _timed(shared, 500)  # warm: the script loaded, the pool's connection open
        redis_spans = await _timed(shared, count)
    finally:
        await shared.close()
        await link.close()
        client = redis.Redis.from_url(url)
        stale = list(client.scan_iter(f"{prefix}:*"))
        if stale:
            client.delete(*stale)
        client.close()
    local = LocalBudget(SETTINGS, _nothing_spent, keys=KEYS)
    return {"redis": redis_spans, "local": await _timed(local, count)}


def main() -> None:
    """Time `count` reserves of each budget and print p50 and p99 in microseconds."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    results = asyncio.run(_run(args.redis, args.count))
    print(f"python {platform.python_version()} ({sys.executable}), {args.count} reserves each")
    for name, spans in results.items():
        ordered = sorted(spans)
        p50 = statistics.median(ordered) * 1e6
        p99 = ordered[int(len(ordered) * 0.99)] * 1e6
        print(f"  {name:>5} reserve: p50 {p50:7.1f} us   p99 {p99:7.1f} us")


if __name__ == "__main__":
    main()
