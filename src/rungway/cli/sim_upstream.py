"""`rungway sim-upstream`: run one simulated upstream in the foreground."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rungway.sim import SimUpstream, builtin_scenario, builtin_scenario_names, load_scenario


def _resolve(scenario: Path) -> Path:
    if scenario.is_file():
        return scenario
    try:
        return builtin_scenario(str(scenario))
    except FileNotFoundError:
        names = ", ".join(builtin_scenario_names())
        message = f"{scenario} is neither a file nor a built-in scenario ({names})"
        raise typer.BadParameter(message, param_hint="--scenario") from None


def sim_upstream(
    scenario: Annotated[
        Path,
        typer.Option(
            "--scenario",
            help="Scenario YAML file, or the name of a built-in one (e.g. claude-plan).",
        ),
    ],
    port: Annotated[int, typer.Option("--port", help="Port to listen on (0 picks one).")],
    host: Annotated[str, typer.Option("--host", help="Interface to listen on.")] = "127.0.0.1",
) -> None:
    """Serve a simulated upstream provider until Ctrl-C."""
    loaded = load_scenario(_resolve(scenario))
    sim = SimUpstream(loaded)

    def announce(url: str) -> None:
        clock = "fake clock (POST /_sim/clock)" if sim.state().fake_clock else "real clock"
        typer.echo(f"sim upstream {loaded.name!r} ({loaded.api} API, {clock}) at {url}")
        typer.echo(f"control API: {url}/_sim/state, /_sim/faults, /_sim/clock, /_sim/reset")

    try:
        sim.serve(host=host, port=port, on_ready=announce)
    except KeyboardInterrupt:
        # uvicorn re-raises the Ctrl-C it handled once it has shut down cleanly.
        typer.echo("sim upstream stopped")
