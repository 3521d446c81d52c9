"""Single-flight usage polls across processes: one replica polls a plan's usage endpoint
per interval, the others read its reading through the shared board."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp

from rungway.adapters.anthropic.messages import OAUTH_BETA
from rungway.clock import FakeClock
from rungway.cluster.polls import RedisPollClaim
from rungway.quota.poller import PollTarget, UsagePoller
from rungway.quota.usage import read_claude_usage
from rungway.routing.settings import LadderSettings
from rungway.sim import Scenario, SimUpstream
from tests.integration.cluster_world import Replica, eventually, replica

START = 1_790_000_000.0
TOKEN = "sk-ant-oat01-shared-polls"
INTERVAL_S = 300.0
SETTINGS = LadderSettings(rung_budget_usd={"cheap": None, "premium": None})


def _subscription() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "shared-plan",
            "api": "anthropic",
            "quota_headers": "anthropic-unified",
            "auth": {"kind": "bearer", "token": TOKEN},
            "models": [{"id": "claude-sonnet-4-5"}],
            "windows": [{"name": "5h", "claim": "five_hour", "capacity": 1000, "length_s": 18000}],
            "clock": {"start": START},
        }
    )


@dataclass
class Poller:
    replica: Replica
    poller: UsagePoller


def _usage_polls(subscription: SimUpstream) -> int:
    return sum(1 for request in subscription.requests if request.path == "/api/oauth/usage")


async def _pollers(
    prefix: str, subscription: SimUpstream, clock: FakeClock, session: aiohttp.ClientSession
) -> list[Poller]:
    async def fetch(
        url: str, headers: Mapping[str, str], deadline_s: float
    ) -> tuple[int, Mapping[str, str], bytes]:
        timeout = aiohttp.ClientTimeout(total=deadline_s)
        async with session.get(url, headers=dict(headers), timeout=timeout) as response:
            return response.status, response.headers, await response.read()

    target = PollTarget(
        "plan",
        f"{subscription.url}/api/oauth/usage",
        {"authorization": f"Bearer {TOKEN}", "anthropic-beta": OAUTH_BETA},
        lambda body, now: read_claude_usage(body, now=now),
    )
    pollers = []
    for name in ("a", "b", "c"):
        one = await replica(prefix, clock, SETTINGS, name=name)
        poller = UsagePoller(
            one.board,
            [target],
            fetch,
            clock,
            SETTINGS,
            interval_s=INTERVAL_S,
            claim=RedisPollClaim(one.link, owner=name),
        )
        pollers.append(Poller(one, poller))
    return pollers


def test_three_replicas_poll_a_plan_once_per_interval_and_all_use_the_reading(
    redis_prefix: str,
) -> None:
    clock = FakeClock(START)

    async def run(subscription: SimUpstream) -> None:
        async with aiohttp.ClientSession() as session:
            pollers = await _pollers(redis_prefix, subscription, clock, session)
            # Every replica's background loop runs against the same fake instant.
            loops = [
                asyncio.get_running_loop().create_task(p.poller.run(tick_s=0.01)) for p in pollers
            ]

            def all_read() -> bool:
                return all(
                    "plan" in p.replica.board.connection_states(clock.now()) for p in pollers
                )

            await eventually(all_read)
            # A few more ticks of every loop: none polls again.
            await asyncio.sleep(0.1)
            assert _usage_polls(subscription) == 1
            clock.advance(INTERVAL_S - 1)
            await asyncio.sleep(0.1)
            assert _usage_polls(subscription) == 1, "no second poll within the interval"
            clock.advance(1)
            await eventually(lambda: _usage_polls(subscription) >= 2)
            await asyncio.sleep(0.1)
            assert _usage_polls(subscription) == 2
            for task in loops:
                task.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
            for p in pollers:
                await p.replica.stop()

    with SimUpstream(_subscription(), clock) as subscription:
        asyncio.run(run(subscription))


def test_a_cold_verify_on_three_replicas_polls_once_and_each_serves_the_reading(
    redis_prefix: str,
) -> None:
    clock = FakeClock(START)

    async def run(subscription: SimUpstream) -> None:
        async with aiohttp.ClientSession() as session:
            pollers = await _pollers(redis_prefix, subscription, clock, session)
            await asyncio.gather(*(p.poller.verify(["plan"]) for p in pollers))
            assert _usage_polls(subscription) == 1
            for p in pollers:
                assert not p.poller.needs_reading("plan", clock.now()), "each has a fresh reading"
            # Later, with every reading stale, the next verify polls once more.
            clock.advance(SETTINGS.max_state_age_s + 1)
            await asyncio.gather(*(p.poller.verify(["plan"]) for p in pollers))
            assert _usage_polls(subscription) == 2
            for p in pollers:
                await p.replica.stop()

    with SimUpstream(_subscription(), clock) as subscription:
        asyncio.run(run(subscription))
