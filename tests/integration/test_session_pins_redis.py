"""Session pins shared through the real Redis: each `process` below stands in for one
gateway process (its own link and pins) on one prefix."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import redis

from rungway.cluster.link import RedisLink
from rungway.cluster.pins import RedisPins
from rungway.engine.pins import MemoryPins
from tests.integration.cluster_world import eventually
from tests.proxy import CuttableProxy
from tests.services import REDIS_URL

NOW = 1_790_000_000.0
TTL = 600.0


@dataclass
class Process:
    link: RedisLink
    pins: RedisPins
    local: MemoryPins

    async def stop(self) -> None:
        await self.pins.stop()
        await self.link.close()


async def process(prefix: str, url: str = REDIS_URL) -> Process:
    link = RedisLink(url, prefix, timeout_s=0.5, retry_s=0.05)
    local = MemoryPins(TTL)
    pins = RedisPins(link, local)
    await link.start()
    return Process(link, pins, local)


def test_a_pin_made_by_one_process_is_read_once_by_another_then_kept_locally(
    redis_prefix: str,
) -> None:
    async def run() -> None:
        a, b = await process(redis_prefix), await process(redis_prefix)
        a.pins.pin("cc:s1", "plan-b", NOW)
        await a.pins.flush()
        assert b.pins.pinned("cc:s1", NOW) is None, "B has not seen the session"
        assert await b.pins.recall("cc:s1", NOW) == "plan-b"
        assert b.pins.pinned("cc:s1", NOW + 1) == "plan-b", "kept locally once read"
        assert await b.pins.recall("cc:unknown", NOW) is None
        await a.stop()
        await b.stop()

    asyncio.run(run())
    client = redis.Redis.from_url(REDIS_URL)
    try:
        assert client.get(f"{redis_prefix}:pin:cc:s1") == b"plan-b"
        ttl_ms = client.pttl(f"{redis_prefix}:pin:cc:s1")
        assert TTL * 1000 - 5000 < ttl_ms <= TTL * 1000, "the pin's TTL is set with it"
    finally:
        client.close()


def test_two_first_pins_settle_on_the_one_written_first(redis_prefix: str) -> None:
    async def run() -> None:
        a, b = await process(redis_prefix), await process(redis_prefix)
        # Both served the session's first turn before either had read the other's pin.
        a.pins.pin("cc:s1", "plan-a", NOW)
        await a.pins.flush()
        b.pins.pin("cc:s1", "plan-b", NOW)
        await b.pins.flush()
        assert b.pins.pinned("cc:s1", NOW) == "plan-a", "B keeps to the pin written first"
        assert a.pins.moves == b.pins.moves == 0
        await a.stop()
        await b.stop()

    asyncio.run(run())


def test_a_move_reaches_every_process_that_knows_the_session(redis_prefix: str) -> None:
    async def run() -> None:
        a, b, c = [await process(redis_prefix) for _ in range(3)]
        a.pins.pin("cc:s1", "plan-a", NOW)
        await a.pins.flush()
        assert await b.pins.recall("cc:s1", NOW) == "plan-a"
        # C moves the session (plan-a was spent when C served a turn of it).
        assert await c.pins.recall("cc:s1", NOW) == "plan-a"
        c.pins.pin("cc:s1", "plan-b", NOW + 1)
        assert c.pins.moves == 1
        await c.pins.flush()
        await eventually(lambda: b.pins.pinned("cc:s1", NOW + 2) == "plan-b")
        await eventually(lambda: a.pins.pinned("cc:s1", NOW + 2) == "plan-b")
        assert a.pins.moves == b.pins.moves == 0, "only the process that moved it counts"
        for each in (a, b, c):
            await each.stop()

    asyncio.run(run())


def test_a_live_pin_is_renewed_in_redis_once_a_quarter_ttl_has_passed(
    redis_prefix: str,
) -> None:
    client = redis.Redis.from_url(REDIS_URL)
    key = f"{redis_prefix}:pin:cc:s1"

    async def run() -> None:
        a = await process(redis_prefix)
        a.pins.pin("cc:s1", "plan-a", NOW)
        await a.pins.flush()
        client.pexpire(key, 1000)  # as if much of its TTL had passed
        a.pins.pin("cc:s1", "plan-a", NOW + 10)
        await a.pins.flush()
        assert client.pttl(key) < 1000 + 1, "a turn soon after is not written again"
        a.pins.pin("cc:s1", "plan-a", NOW + TTL / 4 + 1)
        await a.pins.flush()
        assert client.pttl(key) > TTL * 1000 - 5000, "a quarter TTL on, the pin is renewed"
        await a.stop()

    try:
        asyncio.run(run())
    finally:
        client.close()


def test_without_redis_pins_stay_local_and_reach_redis_when_it_answers(
    redis_prefix: str,
) -> None:
    async def run() -> None:
        with CuttableProxy(("127.0.0.1", 6379)) as proxy:
            await cut_off(proxy)

    async def cut_off(proxy: CuttableProxy) -> None:
        a = await process(redis_prefix, f"redis://{proxy.address}/0")
        b = await process(redis_prefix)
        proxy.cut()
        await eventually(lambda: not a.link.up)
        # Cut off, A neither waits nor fails: it pins on its own.
        assert await a.pins.recall("cc:s1", NOW) is None
        a.pins.pin("cc:s1", "plan-a", NOW)
        assert a.pins.pinned("cc:s1", NOW) == "plan-a"
        assert await b.pins.recall("cc:s1", NOW) is None
        proxy.restore()
        await eventually(lambda: a.link.up)

        async def written() -> bool:
            b.local.clear()
            return await b.pins.recall("cc:s1", NOW) == "plan-a"

        for _ in range(200):
            if await written():
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("A's pin never reached Redis")
        await a.stop()
        await b.stop()

    asyncio.run(run())
