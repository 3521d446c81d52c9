"""`rungway demo`: the gateway in front of four simulated upstreams, no credentials needed."""

from __future__ import annotations

import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.console import Console
from rich.panel import Panel

from rungway.cli.serve import LogFormatOption, QuietOption, listen, run
from rungway.config import load_settings
from rungway.credentials.secrets import read_secrets
from rungway.sim import SimUpstream, builtin_scenario, load_scenario

out = Console()

# (connection id, provider, auth, scenario, credential, path under the sim's URL)
_UPSTREAMS = (
    ("claude-plan", "anthropic", "oauth", "claude-plan", "sk-ant-oat01-sim-plan", ""),
    ("claude-api", "anthropic", "apikey", "anthropic-api", "sk-ant-api03-sim-premium", ""),
    ("cheap", "deepseek", "apikey", "cheap-openai", "sk-sim-cheap", "/v1"),
    ("local", "ollama", "none", "local-ollama", None, "/v1"),
)


def demo(
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port for the gateway (0 picks a free one).")
    ] = 4141,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            help="Keep the demo's config, secrets and ledger here, to use them again; "
            "without it they go in a temporary folder that is removed when the demo stops.",
        ),
    ] = None,
    log_format: LogFormatOption = "text",
    quiet: QuietOption = False,
) -> None:
    """Start simulated upstreams and the gateway wired to them, then print how to use it."""
    # The port first: when it is taken, nothing has been started or written yet.
    sock = listen("127.0.0.1", port)
    port = sock.getsockname()[1]
    folder = data_dir or Path(tempfile.mkdtemp(prefix="rungway-demo-"))
    sims: list[SimUpstream] = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        connections = []
        for connection_id, provider, auth, scenario_name, credential, suffix in _UPSTREAMS:
            scenario = load_scenario(builtin_scenario(scenario_name))
            sim = SimUpstream(scenario)
            sims.append(sim)
            url = sim.start()
            entry: dict[str, object] = {
                "id": connection_id,
                "provider": provider,
                "auth": auth,
                "base_url": url + suffix,
                "models": [model.id for model in scenario.models],
            }
            if credential is not None:
                secret = folder / f"{connection_id}.secret"
                secret.write_text(credential + "\n")
                secret.chmod(0o600)
                entry["credential"] = {"file": str(secret)}
            connections.append(entry)
        config = {
            "server": {"host": "127.0.0.1", "port": port},
            "ledger": {"path": str(folder / "ledger.sqlite3")},
            "connections": connections,
            # Simulated money, but the banner and `rungway spend` show budgets at work.
            "ladder": {"rung_budget_usd": {"cheap": 1.0, "premium": 1.0}, "budget_period": "day"},
            "aliases": {
                "claude-sonnet-*": "claude-sonnet-4-5",
                "claude-opus-*": "claude-sonnet-4-5",
                "claude-haiku-*": "claude-haiku-4-5",
            },
        }
        config_path = folder / "rungway.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        settings = load_settings(config_path)
        secrets = read_secrets(settings, source=str(config_path))
        run(
            settings,
            secrets,
            sock,
            config=config_path,
            log_format=log_format,
            quiet=quiet,
            then=lambda base: _explain(base, config_path, sims, kept=data_dir is not None),
        )
    finally:
        for sim in sims:
            sim.stop()
        if data_dir is None:
            shutil.rmtree(folder, ignore_errors=True)


def _explain(base: str, config_path: Path, sims: list[SimUpstream], *, kept: bool) -> None:
    upstreams = "\n".join(
        f"  {name:<12} {sim.url:<24} {sim.scenario.name}"
        for (name, *_), sim in zip(_UPSTREAMS, sims, strict=True)
    )
    folder = config_path.parent
    where = (
        f"{folder} (kept)"
        if kept
        else f"{folder} (removed when the demo stops; --data-dir DIR keeps it)"
    )
    out.print(
        Panel.fit(
            f"[bold]rungway demo[/] listening on [cyan]{base}[/]\n"
            f"files: {where}\n\nsimulated upstreams:\n{upstreams}",
            title="rungway demo",
        ),
        highlight=False,
    )
    config = shlex.quote(str(config_path))
    out.print(
        "[bold]curl[/] (OpenAI shape):\n"
        f"  curl {base}/v1/chat/completions -H 'content-type: application/json' \\\n"
        '    -d \'{"model": "deepseek-chat", "messages": [{"role": "user", '
        '"content": "hello"}]}\'\n\n'
        "[bold]openai SDK[/]:\n"
        f"  client = openai.OpenAI(base_url='{base}/v1', api_key='demo')\n"
        "  client.chat.completions.create(model='llama3.2', "
        "messages=[{'role': 'user', 'content': 'hi'}])\n\n"
        "[bold]Claude Code[/] (the plan first, the API key when the plan's window is spent):\n"
        f"  ANTHROPIC_BASE_URL={base} ANTHROPIC_AUTH_TOKEN=demo claude\n"
        "  The simulated Claude plan serves Claude Code only, as a real plan's terms say: a\n"
        "  Claude model asked for by curl or an SDK goes to claude-api instead (its skip reads\n"
        "  `terms` in `rungway explain`).\n\n"
        "[bold]rungway[/] commands against this demo, from another terminal:\n"
        f"  rungway status --config {config}\n"
        f"  rungway spend --config {config}\n"
        f"  rungway connections list --config {config}\n"
        f"  rungway explain REQUEST_ID --config {config}   "
        "# the first 8 characters of x-rungway-request-id\n\n"
        f"[bold]dashboard[/]: {base}/dashboard    [bold]metrics[/]: {base}/metrics\n\n"
        "Every response names its connection in [cyan]x-rungway-connection[/]. Ctrl-C stops.",
        highlight=False,
        soft_wrap=True,
    )
