"""`rungway connections ...`: a running gateway's connections, through its admin API."""

from __future__ import annotations

import datetime as dt
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from rungway.config import ConfigError, load_settings

out = Console()
err = Console(stderr=True)

connections = typer.Typer(
    help="Inspect and act on a running gateway's connections.", no_args_is_help=True
)

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="Find the gateway (and its admin key) from this config."),
]
UrlOption = Annotated[
    str | None, typer.Option("--url", help="The gateway's base URL (overrides the config).")
]
KeyEnvOption = Annotated[
    str,
    typer.Option("--admin-key-env", help="Environment variable holding the admin key, if any."),
]


@connections.command("list")
def list_connections(
    config: ConfigOption = None,
    url: UrlOption = None,
    admin_key_env: KeyEnvOption = "RUNGWAY_ADMIN_KEY",
) -> None:
    """Show every connection: billing, quota windows, cooldown and breaker."""
    payload = _call("GET", "/admin/connections", config, url, admin_key_env)
    table = Table(title="connections")
    for column in ("id", "provider", "billing", "windows", "cooldown", "breaker"):
        table.add_column(column)
    for entry in payload["connections"]:
        windows = "\n".join(_window_line(window) for window in entry["windows"]) or "-"
        cooldown = (
            f"until {_clock(entry['cooldown_until'])} ({entry['cooldown_reason']})"
            if entry["cooldown_until"]
            else "-"
        )
        table.add_row(
            entry["id"],
            entry["provider"],
            f"{entry['billing']} / {entry['overage']}",
            windows,
            cooldown,
            entry["breaker"],
        )
    out.print(table)


@connections.command("clear-cooldown")
def clear_cooldown(
    connection_id: Annotated[str, typer.Argument(help="The connection's id.")],
    config: ConfigOption = None,
    url: UrlOption = None,
    admin_key_env: KeyEnvOption = "RUNGWAY_ADMIN_KEY",
) -> None:
    """End a connection's cooldown now, so the ladder may use it at once."""
    path = f"/admin/connections/{connection_id}/clear-cooldown"
    payload = _call("POST", path, config, url, admin_key_env)
    if payload["cleared"]:
        out.print(f"cleared the cooldown of [bold]{connection_id}[/]")
    else:
        out.print(f"{connection_id} was not cooling down; nothing to clear")


def _call(method: str, path: str, config: Path | None, url: str | None, key_env: str) -> Any:
    base = url or _url_from(config)
    request = urllib.request.Request(f"{base.rstrip('/')}{path}", method=method)
    key = os.environ.get(key_env)
    if key:
        request.add_header("authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:
        try:
            message = json.load(error)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = error.reason
        err.print(f"[red]{method} {path}: HTTP {error.code}: {message}[/]", highlight=False)
        raise typer.Exit(1) from None
    except urllib.error.URLError as error:
        err.print(f"[red]cannot reach the gateway at {base}: {error.reason}[/]", highlight=False)
        raise typer.Exit(1) from None


def _url_from(config: Path | None) -> str:
    if config is None:
        return "http://127.0.0.1:4141"
    try:
        settings = load_settings(config)
    except ConfigError as error:
        err.print(f"[red]{error}[/]")
        raise typer.Exit(2) from None
    host = settings.server.host
    if host in ("0.0.0.0", "::"):  # a wildcard bind is reached on loopback
        host = "127.0.0.1"
    return f"http://{host}:{settings.server.port}"


def _window_line(window: dict[str, Any]) -> str:
    used = window["used_percent"]
    scope = f" [{window['model']}]" if window["model"] else ""
    shown = "?" if used is None else f"{used:.0f}%"
    resets = f", resets {_clock(window['resets_at'])}" if window["resets_at"] else ""
    return f"{window['name']}{scope}: {shown} used, {window['status']}{resets}"


def _clock(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
