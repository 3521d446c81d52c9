"""A real gateway on loopback in front of simulated upstreams, for the SDK tests.

Four upstreams run for the whole session and are reset before each test:
- `plan`: a Claude plan (OAuth bearer, unified quota headers) serving claude-sonnet-4-5;
- `api`: an Anthropic API key serving the same model;
- `cheap` and `backup`: two OpenAI-compatible providers serving deepseek-chat.
The gateway config lists them in that order, so fall-through goes plan -> api and
cheap -> backup.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rungway.app import Gateway, build_gateway
from rungway.clock import Clock, FakeClock
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.engine.state import StateSource
from rungway.ledger.sqlite import SqliteLedger, read_rows
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.sim import Scenario, SimUpstream

START = 1_790_000_000.0
SUBSCRIPTION_TOKEN = "sk-ant-oat01-integration-plan"
API_KEY = "sk-ant-api03-integration-key"
CHEAP_KEY = "sk-integration-cheap"
BACKUP_KEY = "sk-integration-backup"
CLAUDE = "claude-sonnet-4-5"
DEEPSEEK = "deepseek-chat"
CLAUDE_CODE_HEADERS = {
    "user-agent": "claude-cli/2.1.332 (external, cli)",
    "x-app": "cli",
    "anthropic-beta": "claude-code-20250219",
}
"""What Claude Code sends that its plan's terms and Anthropic's servers look for
(provider-signals A2.2, A2.6): a client standing in for Claude Code sends them."""


def _scenario(name: str, api: str, headers: str, auth: dict[str, str], model: str) -> Scenario:
    return Scenario.model_validate(
        {
            "name": name,
            "api": api,
            "quota_headers": headers,
            "auth": auth,
            "models": [{"id": model, "context_window": 200000, "max_output_tokens": 8192}],
            "windows": [{"name": "5h", "claim": "five_hour", "capacity": 100000, "length_s": 18000}]
            if headers == "anthropic-unified"
            else [],
            "clock": {"start": START},
            "response": {"output_tokens": 24, "chunk_tokens": 4},
        }
    )


@dataclass
class Upstreams:
    """The session's simulated upstreams."""

    subscription: SimUpstream
    api: SimUpstream
    cheap: SimUpstream
    backup: SimUpstream

    def all(self) -> list[SimUpstream]:
        return [self.subscription, self.api, self.cheap, self.backup]


@pytest.fixture(scope="session")
def upstreams() -> Iterator[Upstreams]:
    sims = Upstreams(
        subscription=SimUpstream(
            _scenario(
                "plan",
                "anthropic",
                "anthropic-unified",
                {"kind": "bearer", "token": SUBSCRIPTION_TOKEN},
                CLAUDE,
            ),
            FakeClock(START),
        ),
        api=SimUpstream(
            _scenario(
                "api",
                "anthropic",
                "anthropic-apikey",
                {"kind": "x-api-key", "token": API_KEY},
                CLAUDE,
            )
        ),
        cheap=SimUpstream(
            _scenario("cheap", "openai", "openai", {"kind": "bearer", "token": CHEAP_KEY}, DEEPSEEK)
        ),
        backup=SimUpstream(
            _scenario(
                "backup", "openai", "openai", {"kind": "bearer", "token": BACKUP_KEY}, DEEPSEEK
            )
        ),
    )
    for sim in sims.all():
        sim.start()
    yield sims
    for sim in sims.all():
        sim.stop()


@pytest.fixture
def sims(upstreams: Upstreams) -> Upstreams:
    """The upstreams, emptied of faults, requests and quota use."""
    for sim in upstreams.all():
        sim.reset()
    return upstreams


@dataclass
class RunningGateway:
    """A gateway serving on loopback."""

    url: str
    gateway: Gateway
    ledger_path: Path

    def rows(self) -> list[dict[str, Any]]:
        """Every ledger row, newest first, once all queued rows are written."""
        self.gateway.ledger.flush()
        return read_rows(self.ledger_path)

    @property
    def ledger(self) -> SqliteLedger:
        assert isinstance(self.gateway.ledger, SqliteLedger)
        return self.gateway.ledger


StartGateway = Callable[..., RunningGateway]


@pytest.fixture
def start_gateway(sims: Upstreams, tmp_path: Path) -> Iterator[StartGateway]:
    """Start a gateway in front of `sims`; keyword arguments override config sections
    (`state_section` is the config's `state:`, as `state` supplies fixed readings)."""
    servers: list[BackgroundServer] = []

    def start(
        *,
        state: StateSource | None = None,
        clock: Clock | None = None,
        state_section: dict[str, Any] | None = None,
        **overrides: Any,
    ) -> RunningGateway:
        secrets = {
            "plan": SUBSCRIPTION_TOKEN,
            "api": API_KEY,
            "cheap": CHEAP_KEY,
            "backup": BACKUP_KEY,
        }
        for name, value in secrets.items():
            (tmp_path / f"{name}.secret").write_text(value)
        ledger_path = tmp_path / "ledger.sqlite3"
        document: dict[str, Any] = {
            "timeouts": {"connect_s": 2, "first_byte_s": 1.5, "idle_s": 1.5},
            # No background polls: tests count the requests each upstream receives.
            "quota": {"poll_interval_s": 0},
            # No rung budgets (the defaults close premium): these tests are about routing,
            # and the budget tests pass their own `ladder`.
            "ladder": {"rung_budget_usd": {"cheap": None, "premium": None}},
            "ledger": {"path": str(ledger_path)},
            "connections": [
                _connection(
                    "plan",
                    "anthropic",
                    "oauth",
                    url=sims.subscription.url,
                    model=CLAUDE,
                    folder=tmp_path,
                ),
                _connection(
                    "api", "anthropic", "apikey", url=sims.api.url, model=CLAUDE, folder=tmp_path
                ),
                _connection(
                    "cheap",
                    "deepseek",
                    "apikey",
                    url=sims.cheap.url + "/v1",
                    model=DEEPSEEK,
                    folder=tmp_path,
                ),
                _connection(
                    "backup",
                    "openai-compatible",
                    "apikey",
                    url=sims.backup.url + "/v1",
                    model=DEEPSEEK,
                    folder=tmp_path,
                ),
            ],
            "aliases": {"claude-sonnet-*": CLAUDE, "fast": DEEPSEEK},
        }
        document.update(overrides)
        if state_section is not None:
            document["state"] = state_section
        settings = parse_settings(document)
        gateway = build_gateway(settings, read_secrets(settings), state=state, clock=clock)
        server = BackgroundServer(
            uvicorn_config(gateway.app, limits=settings.server), name="gateway-under-test"
        )
        servers.append(server)
        return RunningGateway(server.start(), gateway, ledger_path)

    yield start
    for server in servers:
        server.stop()


def _connection(
    connection_id: str, provider: str, auth: str, *, url: str, model: str, folder: Path
) -> dict[str, Any]:
    return {
        "id": connection_id,
        "provider": provider,
        "auth": auth,
        "credential": {"file": str(folder / f"{connection_id}.secret")},
        "base_url": url,
        "models": [model],
    }


@pytest.fixture
def unused_port() -> int:
    """A loopback port with nothing listening on it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(autouse=True)
def _backup_key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNGWAY_IT_BACKUP", BACKUP_KEY)


@pytest.fixture
def any_client_plan(sims: Upstreams) -> Iterator[SimUpstream]:
    """A Claude plan like the session's that serves any client (`auth.clients: any`)."""
    scenario = sims.subscription.scenario
    widened = scenario.model_copy(
        update={"auth": scenario.auth.model_copy(update={"clients": "any"})}
    )
    with SimUpstream(widened) as plan:
        yield plan


def with_a_widened_plan(sims: Upstreams, plan: SimUpstream, folder: Path) -> list[dict[str, Any]]:
    """The session's connections, with the plan's at `plan` and widened (`clients: any`)."""

    def connection(name: str, provider: str, auth: str, url: str, model: str) -> dict[str, Any]:
        secret = {"file": str(folder / f"{name}.secret")}
        return {
            "id": name,
            "provider": provider,
            "auth": auth,
            "credential": secret,
            "base_url": url,
            "models": [model],
        }

    return [
        {**connection("plan", "anthropic", "oauth", plan.url, CLAUDE), "clients": "any"},
        connection("api", "anthropic", "apikey", sims.api.url, CLAUDE),
        connection("cheap", "deepseek", "apikey", sims.cheap.url + "/v1", DEEPSEEK),
        connection("backup", "openai-compatible", "apikey", sims.backup.url + "/v1", DEEPSEEK),
    ]
