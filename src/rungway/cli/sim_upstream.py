"""`rungway sim-upstream`: run one simulated upstream in the foreground.

Once it listens it prints a connection to paste into a config: the provider and auth that
speak to it, its base URL by the config's rule (an OpenAI-shaped one with its version path,
`/v1`; an Anthropic one without; the Codex backend at `/backend-api/codex`; the Gemini API
at `/v1beta` and Gemini Code Assist at `/v1internal`), and the
credential it expects, read from an environment variable.

A pool scenario (one with `pool:`, such as the built-in `claude-pool`) serves each of its
accounts on its own port (`--port P` gives them P, P+1, ...; 0 a free port each) and
prints a connection for each, every account with its own credential and staggered windows.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from pathlib import Path
from typing import Annotated, Any

import typer
import uvloop
import yaml

from rungway.clock import FakeClock
from rungway.sim import (
    Scenario,
    SimUpstream,
    builtin_scenario,
    builtin_scenario_names,
    load_scenario,
)
from rungway.sim.canned import record_answer, serve_canned
from rungway.sim.pool import SimPool


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
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port to listen on (0 picks one).")
    ],
    host: Annotated[str, typer.Option("--host", help="Interface to listen on.")] = "127.0.0.1",
    canned: Annotated[
        bool,
        typer.Option(
            "--canned",
            help="Replay one recorded answer to every request, at almost no cost: no "
            "quota, faults or control API (for throughput benchmarks).",
        ),
    ] = False,
) -> None:
    """Serve a simulated upstream provider until Ctrl-C."""
    loaded = load_scenario(_resolve(scenario))
    if canned:
        _serve_canned(loaded, host, port)
        return
    if loaded.pool is not None:
        _serve_pool(SimPool(loaded), host, port)
        return
    sim = SimUpstream(loaded)

    def announce(url: str) -> None:
        clock = "fake clock (POST /_sim/clock)" if sim.state().fake_clock else "real clock"
        typer.echo(f"sim upstream {loaded.name!r} ({loaded.api} API, {clock}) at {url}")
        typer.echo(f"control API: {url}/_sim/state, /_sim/faults, /_sim/clock, /_sim/reset")
        entry = connection_entry(loaded, url)
        token = loaded.auth.token if loaded.auth.kind != "none" else None
        if token is None:
            typer.echo("credential it expects: none")
        else:
            typer.echo(
                f"credential it expects: {token} (export {credential_variable(loaded)}={token})"
            )
        typer.echo("a connection for the config's `connections:` list:")
        _echo_entries([entry])

    try:
        sim.serve(host=host, port=port, on_ready=announce)
    except KeyboardInterrupt:
        # uvicorn re-raises the Ctrl-C it handled once it has shut down cleanly.
        typer.echo("sim upstream stopped")


def _echo_entries(entries: list[dict[str, Any]]) -> None:
    text = yaml.safe_dump(entries, sort_keys=False, default_flow_style=None)
    typer.echo("".join(f"  {line}" for line in text.splitlines(keepends=True)), nl=False)


def _serve_pool(pool: SimPool, host: str, port: int) -> None:
    def announce(urls: list[str]) -> None:
        scenario = pool.scenario
        fake = isinstance(pool.clock, FakeClock)
        clock = "fake clock (POST /_sim/clock on any account)" if fake else "real clock"
        typer.echo(
            f"sim pool {scenario.name!r}: {len(pool)} accounts ({scenario.api} API, {clock})"
        )
        for account, url in zip(pool.accounts, urls, strict=True):
            state = account.state()
            resets = ", ".join(
                f"{window.name} resets in {window.reset_at - state.now:.0f} s"
                for window in state.windows
            )
            typer.echo(f"  {account.scenario.name} at {url}" + (f" ({resets})" if resets else ""))
        typer.echo(
            "control API on each account: /_sim/state, /_sim/faults, /_sim/clock, /_sim/reset"
        )
        for account in pool.accounts:
            token = account.scenario.auth.token
            typer.echo(
                f"credential {account.scenario.name} expects: {token}"
                f" (export {credential_variable(account.scenario)}={token})"
            )
        typer.echo("a connection per account for the config's `connections:` list:")
        _echo_entries([connection_entry(account.scenario, account.url) for account in pool])

    try:
        pool.serve(host=host, port=port, on_ready=announce)
    except KeyboardInterrupt:
        typer.echo("sim pool stopped")


def _serve_canned(scenario: Scenario, host: str, port: int) -> None:
    answer = record_answer(scenario)

    def announce(url: str) -> None:
        typer.echo(f"canned upstream {scenario.name!r} ({scenario.api} API) at {url}")

    uvloop.install()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_canned(answer, host, port, on_ready=announce))


def credential_variable(scenario: Scenario) -> str:
    """The environment variable the printed connection reads its credential from."""
    return "SIM_" + re.sub(r"[^A-Z0-9]+", "_", scenario.name.upper()).strip("_") + "_KEY"


_PLAN_KEY_APIS = {
    "glm": ("glm-coding", "/api/coding/paas/v4"),
    "kimi-code": ("kimi-code", "/coding"),
    "minimax": ("minimax-token-plan", "/anthropic"),
}
"""The plans a key reaches: their provider, and the path their API is served under."""
_GOOGLE_LOGIN_APIS = {"code-assist": "gemini-code-assist", "antigravity": "antigravity"}
"""The Google logins that speak Code Assist's envelope under `/v1internal`, by provider."""


def connection_entry(scenario: Scenario, url: str) -> dict[str, Any]:
    """A config connection that reaches the sim at `url` as the provider it stands for."""
    bearer = "apikey"
    if scenario.api == "anthropic":
        # A bearer token on the Messages API is a plan's login (see `AuthSpec`).
        provider, base_url, bearer = "anthropic", url, "oauth"
    elif scenario.api == "gemini":
        provider, base_url = "gemini", f"{url}/v1beta"
    elif scenario.api in _GOOGLE_LOGIN_APIS:
        provider, base_url, bearer = _GOOGLE_LOGIN_APIS[scenario.api], f"{url}/v1internal", "oauth"
    elif scenario.api in _PLAN_KEY_APIS:
        # A plan key, not a login; its usage endpoint is on the same host, as on the vendor's.
        provider, path = _PLAN_KEY_APIS[scenario.api]
        base_url = url + path
    elif scenario.codex_settings is not None and scenario.api == "responses":
        provider, base_url, bearer = "codex", f"{url}/backend-api/codex", "oauth"
    elif scenario.api == "responses":
        provider, base_url = "openai-responses", f"{url}/v1"
    elif scenario.copilot_settings is not None:
        provider, base_url, bearer = "copilot", f"{url}/v1", "oauth"
    elif scenario.credit_settings is not None:
        provider, base_url = "openrouter", f"{url}/v1"
    else:
        provider, base_url = "openai-compatible", f"{url}/v1"
    auth = {"none": "none", "bearer": bearer, "x-api-key": "apikey"}[scenario.auth.kind]
    entry: dict[str, Any] = {"id": scenario.name, "provider": provider, "auth": auth}
    if auth != "none":
        entry["credential"] = {"env": credential_variable(scenario)}
    entry["base_url"] = base_url
    # The usage endpoints the sim serves where each provider's own host would.
    if provider == "copilot":
        entry["usage_base_url"] = url
    elif provider == "openrouter":
        entry["usage_base_url"] = f"{url}/api/v1"
    entry["models"] = [model.id for model in scenario.models]
    return entry
