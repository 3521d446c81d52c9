"""A retired provider (consumer Code Assist) as the admin API, which the dashboard shows,
and the start-up banner mark it, next to the Antigravity connection that replaced it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from rich.console import Console

from rungway.app import build_gateway
from rungway.cli.banner import facts, show
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.sim import SimUpstream, builtin_scenario, load_scenario


@pytest.fixture(scope="module")
def sims() -> Iterator[tuple[SimUpstream, SimUpstream]]:
    with (
        SimUpstream(load_scenario(builtin_scenario("antigravity"))) as antigravity,
        SimUpstream(load_scenario(builtin_scenario("gemini-code-assist"))) as code_assist,
    ):
        yield antigravity, code_assist


def test_the_admin_api_and_banner_mark_a_retired_provider(
    sims: tuple[SimUpstream, SimUpstream], tmp_path: Path
) -> None:
    antigravity, code_assist = sims
    (tmp_path / "token").write_text("ya29.unused")
    settings = parse_settings(
        {
            "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
            "connections": [
                {
                    "id": provider,
                    "provider": provider,
                    "auth": "oauth",
                    "credential": {"file": str(tmp_path / "token")},
                    "base_url": f"{sim.url}/v1internal",
                    "models": ["gemini-3-flash"],
                }
                for provider, sim in (
                    ("antigravity", antigravity),
                    ("gemini-code-assist", code_assist),
                )
            ],
        }
    )
    gateway = build_gateway(settings, read_secrets(settings))
    with BackgroundServer(uvicorn_config(gateway.app), "gateway") as server:
        listed = httpx.get(f"{server.url}/admin/connections").json()["connections"]
        by_id = {entry["id"]: entry for entry in listed}
        assert by_id["antigravity"]["retired"] is None
        retired = by_id["gemini-code-assist"]["retired"]
        assert retired["since"] == "2026-06-18"
        assert retired["successor"] == "antigravity"
        said = facts(settings, gateway.roster, server.url, None, tmp_path / "ledger.sqlite3")
    assert said["retired"] == {"gemini-code-assist": retired["notice"]}
    console = Console(record=True, width=200)
    show(said, json_lines=False, console=console)
    assert "retired" in console.export_text()
