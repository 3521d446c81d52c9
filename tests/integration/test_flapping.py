"""Usage hovering at the cut-off moves the ladder once, through the real gateway.

A test steers the plan's weekly window around the exit cut-off through the simulated
upstream's control API, has the gateway read it from the plan's usage endpoint through the
admin API, and sends one `auto/thrifty` request per step. A flap is a return to the plan
after leaving it. With the re-entry band the count is 0; without it the same sequence
flaps, which shows the count can see one.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from rungway.app import build_gateway
from rungway.clock import FakeClock
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.sim import Scenario, SimUpstream
from tests.integration.conftest import CLAUDE_CODE_HEADERS

START = 1_790_000_000.0
SUBSCRIPTION_TOKEN = "sk-ant-oat01-flapping-plan"
API_KEY = "sk-ant-api03-flapping-key"
CAPACITY = 100_000
STEPS = 160
HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]


def _scenario(name: str, **fields: Any) -> Scenario:
    return Scenario.model_validate(
        {
            "name": name,
            "api": "anthropic",
            "models": [{"id": "claude-sonnet-4-5"}],
            "response": {"output_tokens": 8},
            **fields,
        }
    )


@pytest.fixture
def sims() -> Iterator[tuple[FakeClock, SimUpstream, SimUpstream]]:
    clock = FakeClock(START)
    subscription = _scenario(
        "hovering-plan",
        quota_headers="anthropic-unified",
        auth={"kind": "bearer", "token": SUBSCRIPTION_TOKEN},
        windows=[{"name": "7d", "claim": "seven_day", "capacity": CAPACITY, "length_s": 604800}],
    )
    api = _scenario(
        "api", quota_headers="anthropic-apikey", auth={"kind": "x-api-key", "token": API_KEY}
    )
    with SimUpstream(subscription, clock) as subscription_sim, SimUpstream(api, clock) as api_sim:
        yield clock, subscription_sim, api_sim


def _served(
    tmp_path: Path,
    sims: tuple[FakeClock, SimUpstream, SimUpstream],
    ladder: dict[str, object],
    levels: list[float],
) -> list[str]:
    clock, subscription, api = sims
    (tmp_path / "plan").write_text(SUBSCRIPTION_TOKEN)
    (tmp_path / "api").write_text(API_KEY)
    settings = parse_settings(
        {
            "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
            "quota": {"poll_interval_s": 0},
            # The API key's premium rung without a limit: only the plan's quota moves it.
            "ladder": {"rung_budget_usd": {"premium": None}, **ladder},
            "connections": [
                {
                    "id": connection_id,
                    "provider": "anthropic",
                    "auth": auth,
                    "credential": {"file": str(tmp_path / connection_id)},
                    "base_url": sim.url,
                    "models": ["claude-sonnet-4-5"],
                }
                for connection_id, auth, sim in (
                    ("plan", "oauth", subscription),
                    ("api", "apikey", api),
                )
            ],
        }
    )
    gateway = build_gateway(settings, read_secrets(settings), clock=clock)
    served = []
    with (
        BackgroundServer(uvicorn_config(gateway.app), "gateway") as server,
        httpx.Client(base_url=server.url) as admin,
        httpx.Client(base_url=subscription.url) as control,
        anthropic.Anthropic(
            base_url=server.url,
            api_key="unused",
            max_retries=0,
            default_headers=CLAUDE_CODE_HEADERS,
        ) as claude,
    ):
        for remaining_percent in levels:
            # The usage endpoint allows about 30 reads an hour: one step every 150 s.
            clock.advance(150)
            used = round(CAPACITY * (100 - remaining_percent) / 100)
            control.post("/_sim/windows", json={"name": "7d", "used": used}).raise_for_status()
            admin.post("/admin/connections/plan/refresh-quota").raise_for_status()
            raw = claude.messages.with_raw_response.create(
                model="auto/thrifty", max_tokens=16, messages=HELLO
            )
            served.append(raw.headers["x-rungway-connection"])
    return served


def _hovering() -> list[float]:
    """Plenty left at first, then remaining percent hovering between 1.2 and 4.8."""
    rng = random.Random(20261203)
    return [50.0] * 10 + [round(rng.uniform(1.2, 4.8), 2) for _ in range(STEPS)]


def _flaps(served: list[str]) -> int:
    return sum(
        1 for before, after in itertools.pairwise(served) if (before, after) == ("api", "plan")
    )


def test_usage_hovering_at_the_cutoff_leaves_the_plan_once_and_never_flaps(
    tmp_path: Path, sims: tuple[FakeClock, SimUpstream, SimUpstream]
) -> None:
    levels = _hovering()
    served = _served(
        tmp_path, sims, {"exit_cutoff_percent": 2, "reentry_min_remaining_percent": 5}, levels
    )
    assert served[:10] == ["plan"] * 10
    first_exit = next(i for i, level in enumerate(levels) if level <= 2)
    assert served[: first_exit + 1].count("api") == 1, "the plan leaves on the first low reading"
    assert served[first_exit] == "api"
    assert _flaps(served) == 0


def test_without_the_reentry_band_the_same_usage_flaps(
    tmp_path: Path, sims: tuple[FakeClock, SimUpstream, SimUpstream]
) -> None:
    served = _served(
        tmp_path, sims, {"exit_cutoff_percent": 2, "reentry_min_remaining_percent": 2}, _hovering()
    )
    assert _flaps(served) > 10
