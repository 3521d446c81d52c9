"""The ladder's live state outlives a restart: gateways stopped and started on the same files.

Each test runs one gateway, stops it, and starts another on the same ledger (and so the
same `<ledger>.state`), in front of the same simulated upstreams on one fake clock.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
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
SUBSCRIPTION_TOKEN = "sk-ant-oat01-restart-plan"
API_KEY = "sk-ant-api03-restart-key"
CAPACITY = 100_000
HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]
Sims = tuple[FakeClock, SimUpstream, SimUpstream]


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
def sims() -> Iterator[Sims]:
    clock = FakeClock(START)
    subscription = _scenario(
        "restart-plan",
        quota_headers="anthropic-unified",
        auth={"kind": "bearer", "token": SUBSCRIPTION_TOKEN},
        windows=[{"name": "7d", "claim": "seven_day", "capacity": CAPACITY, "length_s": 604800}],
    )
    api = _scenario(
        "api", quota_headers="anthropic-apikey", auth={"kind": "x-api-key", "token": API_KEY}
    )
    with SimUpstream(subscription, clock) as subscription_sim, SimUpstream(api, clock) as api_sim:
        yield clock, subscription_sim, api_sim


class Running:
    """One gateway on loopback, with an admin client and an Anthropic client."""

    def __init__(self, url: str) -> None:
        self.admin = httpx.Client(base_url=url)
        self.claude = anthropic.Anthropic(
            base_url=url, api_key="unused", max_retries=0, default_headers=CLAUDE_CODE_HEADERS
        )

    def served(self) -> str:
        """The connection that served one `auto/thrifty` request."""
        raw = self.claude.messages.with_raw_response.create(
            model="auto/thrifty", max_tokens=16, messages=HELLO
        )
        return raw.headers["x-rungway-connection"]

    def subscription(self) -> dict[str, Any]:
        """The plan connection as `/admin/connections` shows it."""
        listed = self.admin.get("/admin/connections").raise_for_status().json()["connections"]
        found: dict[str, Any] = next(c for c in listed if c["id"] == "plan")
        return found


@contextmanager
def gateway(tmp_path: Path, sims: Sims) -> Iterator[Running]:
    """A gateway on the test's ledger; stopping it is a clean shutdown."""
    clock, subscription, api = sims
    (tmp_path / "plan").write_text(SUBSCRIPTION_TOKEN)
    (tmp_path / "api").write_text(API_KEY)
    settings = parse_settings(
        {
            "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
            "quota": {"poll_interval_s": 0},
            "ladder": {
                "rung_budget_usd": {"premium": None},
                "exit_cutoff_percent": 2,
                "reentry_min_remaining_percent": 5,
            },
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
    built = build_gateway(settings, read_secrets(settings), clock=clock)
    with BackgroundServer(uvicorn_config(built.app), "gateway") as server:
        running = Running(server.url)
        try:
            yield running
        finally:
            running.admin.close()
            running.claude.close()


def _subscription_at(sims: Sims, running: Running, remaining_percent: float) -> None:
    """Steer the plan's weekly window and have the gateway read it from the usage endpoint."""
    clock, subscription, _ = sims
    clock.advance(150)  # the usage endpoint allows about 30 reads an hour
    used = round(CAPACITY * (100 - remaining_percent) / 100)
    httpx.post(
        f"{subscription.url}/_sim/windows", json={"name": "7d", "used": used}
    ).raise_for_status()
    running.admin.post("/admin/connections/plan/refresh-quota").raise_for_status()


def test_a_disable_holds_across_a_restart_until_enabled(tmp_path: Path, sims: Sims) -> None:
    with gateway(tmp_path, sims) as first:
        first.admin.post("/admin/connections/plan/disable").raise_for_status()
        assert first.served() == "api"
    with gateway(tmp_path, sims) as second:
        assert second.subscription()["disabled"] is True
        assert second.served() == "api"
        second.admin.post("/admin/connections/plan/enable").raise_for_status()
        assert second.served() == "plan"
    with gateway(tmp_path, sims) as third:
        assert third.subscription()["disabled"] is False
        assert third.served() == "plan"


def test_a_cooldown_survives_a_restart_and_ends_on_time(tmp_path: Path, sims: Sims) -> None:
    clock, subscription, _ = sims
    fault = {"kind": "http_error", "status": 429, "error_type": "rate_limit_error"}
    httpx.post(
        f"{subscription.url}/_sim/faults", json={**fault, "retry_after_s": 600}
    ).raise_for_status()
    with gateway(tmp_path, sims) as first:
        assert first.served() == "api", "the plan's 429 falls through"
        until = first.subscription()["cooldown_until"]
        assert until == START + 600
    clock.advance(300)
    with gateway(tmp_path, sims) as second:
        assert second.subscription()["cooldown_until"] == until
        assert second.served() == "api"
        clock.advance(299)
        assert second.served() == "api"
        clock.advance(2)
        assert second.served() == "plan"
        assert second.subscription()["cooldown_until"] is None


def test_hysteresis_survives_a_restart(tmp_path: Path, sims: Sims) -> None:
    with gateway(tmp_path, sims) as first:
        _subscription_at(sims, first, 50.0)
        assert first.served() == "plan"
        _subscription_at(sims, first, 1.0)
        assert first.served() == "api", "1% left is below the 2% exit"
    with gateway(tmp_path, sims) as second:
        _subscription_at(sims, second, 3.0)
        assert second.served() == "api", "3% is inside the band: the plan stays out"
        _subscription_at(sims, second, 6.0)
        assert second.served() == "plan", "above the 5% re-entry it comes back"


def test_a_corrupt_state_file_starts_clean_with_a_warning(
    tmp_path: Path, sims: Sims, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ledger.sqlite3.state"
    path.write_bytes(b"\x00garbage, not a database\xff" * 64)
    with caplog.at_level(logging.WARNING, "rungway.quota"), gateway(tmp_path, sims) as first:
        assert first.served() == "plan"
        first.admin.post("/admin/connections/plan/disable").raise_for_status()
    assert f"{path} cannot be read" in caplog.text
    with gateway(tmp_path, sims) as second:
        assert second.subscription()["disabled"] is True, "the new file keeps state again"


def test_a_missing_state_file_starts_clean_with_a_warning(
    tmp_path: Path, sims: Sims, caplog: pytest.LogCaptureFixture
) -> None:
    with gateway(tmp_path, sims) as first:
        first.admin.post("/admin/connections/plan/disable").raise_for_status()
    path = tmp_path / "ledger.sqlite3.state"
    assert path.exists()
    path.unlink()
    with caplog.at_level(logging.WARNING, "rungway.quota"), gateway(tmp_path, sims) as second:
        assert second.subscription()["disabled"] is False
        assert second.served() == "plan"
    assert f"{path} is missing" in caplog.text
