"""`rungway connections ...`: a running gateway's connections, through its admin API."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rungway.cli.admin_client import ConfigOption, KeyEnvOption, UrlOption, admin_call
from rungway.cli.import_login import import_login
from rungway.cli.times import STALE, iso_time, time_left

out = Console()

connections = typer.Typer(
    help="Inspect and act on a running gateway's connections.", no_args_is_help=True
)
connections.command("import")(import_login)


@connections.command("list")
def list_connections(
    config: ConfigOption = None,
    url: UrlOption = None,
    admin_key_env: KeyEnvOption = "RUNGWAY_ADMIN_KEY",
) -> None:
    """Show every connection: billing, quota windows, cooldown, breaker and disabling."""
    payload = admin_call("GET", "/admin/connections", config, url, admin_key_env)
    # Read instants against the gateway's clock, so a reset it has passed reads as passed here.
    now = payload.get("now") or time.time()
    table = Table(title="connections")
    for column in ("id", "provider", "billing", "windows", "cooldown", "breaker"):
        table.add_column(column)
    for entry in payload["connections"]:
        windows = "\n".join(_window_line(window, now) for window in entry["windows"]) or "-"
        cooldown = _cooldown(entry, now) if entry["cooldown_until"] else "-"
        # Ids, model names and upstream reasons may hold brackets: print them as text.
        name = escape(entry["id"])
        table.add_row(
            f"{name}\n[red]disabled[/]" if entry.get("disabled") else name,
            escape(entry["provider"]),
            escape(f"{entry['billing']} / {entry['overage']}"),
            escape(windows),
            escape(cooldown),
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
    payload = _act(connection_id, "clear-cooldown", config, url, admin_key_env)
    if payload["cleared"]:
        out.print(f"cleared the cooldown of [bold]{connection_id}[/]")
    else:
        out.print(f"{connection_id} was not cooling down; nothing to clear")


@connections.command("disable")
def disable(
    connection_id: Annotated[str, typer.Argument(help="The connection's id.")],
    config: ConfigOption = None,
    url: UrlOption = None,
    admin_key_env: KeyEnvOption = "RUNGWAY_ADMIN_KEY",
) -> None:
    """Take a connection out of the ladder until it is enabled (or the gateway restarts)."""
    payload = _act(connection_id, "disable", config, url, admin_key_env)
    if payload["changed"]:
        out.print(f"disabled [bold]{connection_id}[/]: no request will be routed to it")
    else:
        out.print(f"{connection_id} was already disabled")


@connections.command("enable")
def enable(
    connection_id: Annotated[str, typer.Argument(help="The connection's id.")],
    config: ConfigOption = None,
    url: UrlOption = None,
    admin_key_env: KeyEnvOption = "RUNGWAY_ADMIN_KEY",
) -> None:
    """Put a disabled connection back into the ladder."""
    payload = _act(connection_id, "enable", config, url, admin_key_env)
    if payload["changed"]:
        out.print(f"enabled [bold]{connection_id}[/]: the ladder may use it again")
    else:
        out.print(f"{connection_id} was not disabled; nothing to enable")


def _window_line(window: dict[str, Any], now: float) -> str:
    used = window["used_percent"]
    scope = f" [{window['model']}]" if window["model"] else ""
    shown = "?" if used is None else f"{used:.0f}%"
    resets_at = window["resets_at"]
    if not resets_at:
        resets = ""
    elif resets_at <= now:
        resets = f" ({STALE})"
    else:
        resets = f", resets {iso_time(resets_at)}"
    return f"{window['name']}{scope}: {shown} used, {window['status']}{resets}"


def _cooldown(entry: dict[str, Any], now: float) -> str:
    """One sentence: `cooling down until 2026-12-03T14:05:00Z (rate_limited), 4m10s left`."""
    until = entry["cooldown_until"]
    reason = f" ({entry['cooldown_reason']})" if entry["cooldown_reason"] else ""
    return f"cooling down until {iso_time(until)}{reason}, {time_left(until, now)} left"


def _act(
    connection_id: str, action: str, config: Path | None, url: str | None, key_env: str
) -> Any:
    """POST one of the admin API's actions on a connection."""
    path = f"/admin/connections/{quote(connection_id, safe='')}/{action}"
    return admin_call("POST", path, config, url, key_env)
