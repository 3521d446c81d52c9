"""A browser on the dashboard of a real gateway, in front of simulated upstreams.

Chromium comes from Debian (`apt-get install chromium`, done by `.ci/run`), driven headless
by Playwright; without it these tests skip, or fail when RUNGWAY_REQUIRE_ALL_TESTS=1
(tests/installs.py). Each test gets its own world: a Claude-plan-like subscription whose 5h
window holds about six requests, an Anthropic API key above it on the premium rung, and a
gateway sharing the plan's fake clock, so a window's reset comes in an instant. The clock
starts at the real time, so that the ledger's rows (stamped by the wall clock) fall in the
gateway's month.

Screenshots go to `$RUNGWAY_TEST_ARTIFACTS/browser/` (default `test-artifacts/browser/`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import pytest
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Page,
    Playwright,
    expect,
    sync_playwright,
)

from rungway.app import Gateway, build_gateway
from rungway.clock import FakeClock
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.sim import Scenario, SimUpstream
from tests.installs import ci_step, not_installed
from tests.integration.conftest import CLAUDE_CODE_HEADERS

CHROMIUM = Path("/usr/bin/chromium")
INSTALL_STEP = f"as root, run: {ci_step('apt-get install')}"
ARTIFACTS_ENV = "RUNGWAY_TEST_ARTIFACTS"
SUBSCRIPTION_TOKEN = "sk-ant-oat01-browser-plan"
API_KEY = "sk-ant-api03-browser-key"
ADMIN_KEY = "rw-admin-browser-test"
FIVE_HOURS = 5 * 3600.0
MODEL = "claude-sonnet-4-5"
HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]


@dataclass
class World:
    """A gateway in front of a plan and an API key, and the clock they share."""

    clock: FakeClock
    subscription: SimUpstream
    gateway: Gateway
    url: str

    def send(self, model: str = "auto/thrifty") -> str:
        """Send one request as Claude Code, the one client the plan serves; answer the
        connection that served it."""
        with anthropic.Anthropic(
            base_url=self.url,
            api_key="unused",
            max_retries=0,
            default_headers=CLAUDE_CODE_HEADERS,
        ) as client:
            raw = client.messages.with_raw_response.create(
                model=model, max_tokens=64, messages=HELLO
            )
        return raw.headers["x-rungway-connection"]


def _subscription(start: float) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "browser-plan",
            "api": "anthropic",
            "quota_headers": "anthropic-unified",
            "auth": {"kind": "bearer", "token": SUBSCRIPTION_TOKEN},
            "models": [{"id": MODEL}],
            "windows": [
                # About six requests of ~35 tokens each fill the 5h window.
                {"name": "5h", "claim": "five_hour", "capacity": 200, "length_s": FIVE_HOURS},
                {"name": "7d", "claim": "seven_day", "capacity": 100000, "length_s": 604800},
            ],
            "clock": {"start": start},
            "response": {"output_tokens": 24, "chunk_tokens": 4},
        }
    )


def _api() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "browser-api",
            "api": "anthropic",
            "quota_headers": "anthropic-apikey",
            "auth": {"kind": "x-api-key", "token": API_KEY},
            "models": [{"id": MODEL}],
            "response": {"output_tokens": 24, "chunk_tokens": 4},
        }
    )


def start_world(folder: Path, **overrides: Any) -> Iterator[World]:
    """Run the sims and a gateway until the generator is closed."""
    # Whole seconds: the quota headers carry reset instants in whole seconds.
    clock = FakeClock(float(int(time.time())))
    subscription = SimUpstream(_subscription(clock.now()), clock)
    api = SimUpstream(_api())
    (folder / "plan").write_text(SUBSCRIPTION_TOKEN)
    (folder / "api").write_text(API_KEY)
    with subscription, api:
        document: dict[str, Any] = {
            "ledger": {"path": str(folder / "ledger.sqlite3")},
            "quota": {"poll_interval_s": 0},
            "ladder": {"rung_budget_usd": {"premium": 2.0}},
            "connections": [
                {
                    "id": "plan",
                    "provider": "anthropic",
                    "auth": "oauth",
                    "credential": {"file": str(folder / "plan")},
                    "base_url": subscription.url,
                    "models": [MODEL],
                },
                {
                    "id": "api",
                    "provider": "anthropic",
                    "auth": "apikey",
                    "credential": {"file": str(folder / "api")},
                    "base_url": api.url,
                    "models": [MODEL],
                },
            ],
            **overrides,
        }
        settings = parse_settings(document)
        gateway = build_gateway(settings, read_secrets(settings), clock=clock)
        with BackgroundServer(uvicorn_config(gateway.app), "gateway") as server:
            yield World(clock, subscription, gateway, server.url)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """A gateway whose admin API answers loopback without a key."""
    yield from start_world(tmp_path)


@pytest.fixture
def keyed_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """A gateway whose admin API wants `ADMIN_KEY`."""
    monkeypatch.setenv("RUNGWAY_BROWSER_ADMIN", ADMIN_KEY)
    yield from start_world(tmp_path, admin={"key": {"env": "RUNGWAY_BROWSER_ADMIN"}})


# Per module, not per session: the driver holds an event loop on the main thread while it
# runs, and a later test calling `asyncio.run` must not find it.
@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    if not CHROMIUM.is_file():
        not_installed(f"no Chromium at {CHROMIUM}", INSTALL_STEP)
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
    yield chromium
    chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A laptop-sized page in light mode that fails the test on any script error."""
    # Generous waits: the machine running the suite may be busy with other tests.
    expect.set_options(timeout=10_000)
    context = browser.new_context(viewport={"width": 1440, "height": 900}, color_scheme="light")
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))

    def console(message: ConsoleMessage) -> None:
        # A refused fetch (the 401 that asks for the admin key) is logged by the browser
        # itself; only the page's own errors count.
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            errors.append(message.text)

    tab.on("console", console)
    yield tab
    context.close()
    assert errors == [], f"the page reported errors: {errors}"


@pytest.fixture
def artifacts(request: pytest.FixtureRequest) -> Path:
    """The folder for this test's screenshots."""
    root = Path(os.environ.get(ARTIFACTS_ENV, "test-artifacts")) / "browser"
    folder: Path = root / request.node.name
    folder.mkdir(parents=True, exist_ok=True)
    return folder
