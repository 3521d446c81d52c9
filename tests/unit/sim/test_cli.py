"""`rungway sim-upstream`: the typer command runs a sim in the foreground until Ctrl-C."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from rungway.cli.sim_upstream import connection_entry, credential_variable, sim_upstream
from rungway.sim import builtin_scenario, load_scenario

from .conftest import request

# The lead registers the command on the real app; this stands in for that app.
RUN_COMMAND = (
    "import typer\n"
    "from rungway.cli.sim_upstream import sim_upstream\n"
    "app = typer.Typer()\n"
    "app.command('sim-upstream')(sim_upstream)\n"
    "app.command('other')(lambda: None)\n"
    "app()\n"
)


def test_unknown_scenario_is_a_bad_parameter(tmp_path: Path) -> None:
    with pytest.raises(typer.BadParameter, match="claude-plan"):
        sim_upstream(scenario=tmp_path / "missing.yaml", port=0)


@pytest.mark.parametrize(
    "name",
    [
        "cheap-openai",
        "codex-plan",
        "copilot-seat",
        "gemini-api",
        "gemini-code-assist",
        "openrouter",
    ],
)
def test_command_serves_a_builtin_scenario_until_interrupted(name: str) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            RUN_COMMAND,
            "sim-upstream",
            "--scenario",
            name,
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first_line = process.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+)", first_line)
        assert match, first_line
        state = request(match.group(1), "GET", "/_sim/state").json()
        assert state["scenario"] == name
        assert state["fake_clock"] is False
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


@pytest.mark.parametrize(
    ("name", "provider", "auth", "base_path"),
    [
        ("gemini-api", "gemini", "apikey", "/v1beta"),
        ("gemini-code-assist", "gemini-code-assist", "oauth", "/v1internal"),
        ("antigravity", "antigravity", "oauth", "/v1internal"),
    ],
)
def test_the_google_scenarios_print_their_providers_connection(
    name: str, provider: str, auth: str, base_path: str
) -> None:
    scenario = load_scenario(builtin_scenario(name))
    entry = connection_entry(scenario, "http://127.0.0.1:9")
    assert (entry["provider"], entry["auth"]) == (provider, auth)
    assert entry["base_url"] == "http://127.0.0.1:9" + base_path
    assert entry["credential"] == {"env": credential_variable(scenario)}
