"""`rungway connections ...`: a running gateway's connections, through its admin API."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from rungway.cli.admin_client import ConfigOption, KeyEnvOption, UrlOption, admin_call

out = Console()

connections = typer.Typer(
    help="Inspect and act on a running gateway's connections.", no_args_is_help=True
)


@connections.command("list")
def list_connections(
    config: ConfigOption = None,
    url: UrlOption = None,
    admin_key_env: KeyEnvOption = "RUNGWAY_ADMIN_KEY",
) -> None:
    """Show every connection: billing, quota windows, cooldown and breaker."""
    payload = admin_call("GET", "/admin/connections", config, url, admin_key_env)
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
    payload = admin_call("POST", path, config, url, admin_key_env)
    if payload["cleared"]:
        out.print(f"cleared the cooldown of [bold]{connection_id}[/]")
    else:
        out.print(f"{connection_id} was not cooling down; nothing to clear")


def _window_line(window: dict[str, Any]) -> str:
    used = window["used_percent"]
    scope = f" [{window['model']}]" if window["model"] else ""
    shown = "?" if used is None else f"{used:.0f}%"
    resets = f", resets {_clock(window['resets_at'])}" if window["resets_at"] else ""
    return f"{window['name']}{scope}: {shown} used, {window['status']}{resets}"


def _clock(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
