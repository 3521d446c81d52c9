"""Client keys' request rates shared through Redis by every process, and each process's own
window while Redis does not answer."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from rungway.clock import FakeClock
from rungway.cluster.link import RedisLink
from rungway.cluster.rate import RedisRateWindows
from rungway.server.rate import RequestRate
from tests.integration.cluster_world import eventually
from tests.proxy import CuttableProxy
from tests.services import REDIS_URL

START = 1_790_000_000.0
LIMITS = {"team": 3}


async def _rate(url: str, prefix: str, clock: FakeClock) -> tuple[RequestRate, RedisLink]:
    link = RedisLink(url, prefix, timeout_s=0.5, retry_s=0.05)
    await link.start()
    return RequestRate(LIMITS, clock, RedisRateWindows(link)), link


def test_two_processes_share_one_window_per_key(redis_prefix: str) -> None:
    async def run() -> None:
        clock = FakeClock(START)
        a, link_a = await _rate(REDIS_URL, redis_prefix, clock)
        b, link_b = await _rate(REDIS_URL, redis_prefix, clock)
        assert await a.admit("team") is None
        clock.advance(10)
        assert await b.admit("team") is None
        assert await a.admit("team") is None
        assert await a.admit("someone-unlimited") is None
        # The window is full across both: each refuses until the first start is 60 s old.
        assert await b.admit("team") == pytest.approx(50.0)
        assert await a.admit("team") == pytest.approx(50.0)
        clock.advance(50)
        assert await b.admit("team") is None
        assert await a.admit("team") == pytest.approx(10.0)
        await link_a.close()
        await link_b.close()

    asyncio.run(run())


def test_without_redis_at_start_each_process_keeps_its_own_window(redis_prefix: str) -> None:
    async def run() -> None:
        clock = FakeClock(START)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            closed = probe.getsockname()[1]
        rate, link = await _rate(f"redis://127.0.0.1:{closed}/0", redis_prefix, clock)
        assert not link.up
        for _ in range(3):
            assert await rate.admit("team") is None
        assert await rate.admit("team") == pytest.approx(60.0)
        await link.close()

    asyncio.run(run())


def test_redis_lost_mid_run_falls_back_at_once_to_the_process_window(redis_prefix: str) -> None:
    async def run() -> None:
        clock = FakeClock(START)
        with CuttableProxy(("127.0.0.1", 6379)) as proxy:
            a, link_a = await _rate(f"redis://{proxy.address}/0", redis_prefix, clock)
            b, link_b = await _rate(REDIS_URL, redis_prefix, clock)
            assert await b.admit("team") is None
            assert await b.admit("team") is None
            assert await a.admit("team") is None
            assert await a.admit("team") == pytest.approx(60.0), "shared: the window is full"
            proxy.cut()
            started = time.perf_counter()
            # A's own window holds its one start: two more fit while Redis is away.
            assert await a.admit("team") is None
            assert time.perf_counter() - started < 1.0, "a lost Redis costs one timeout at most"
            assert not link_a.up
            assert await a.admit("team") is None
            assert await a.admit("team") == pytest.approx(60.0)
            proxy.restore()
            await eventually(lambda: link_a.up)
            # Shared again: B's two and A's one are in the window (A's local two are not).
            assert await a.admit("team") == pytest.approx(60.0)
            await link_a.close()
            await link_b.close()

    asyncio.run(run())
