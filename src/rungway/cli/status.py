"""`rungway status`: the ladder of a running gateway at a glance, through its admin API.

One table: the five rungs in escalation order, each with the connections that serve a
model on it, their quota windows (used share and a countdown to the reset), cooldown,
breaker, whether an operator disabled them, and which clients a plan serves (its terms,
or the operator's `clients: any`). Under it, the plans' accounts grouped by pool, with
their burn rates, forecasts, pinned sessions and cache hits (`pool_table.py`), and a line
for each shared store (Redis, PostgreSQL) the gateway uses: up, or degraded and why.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rungway.cli.admin_client import (
    ConfigOption,
    KeyEnvOption,
    UrlOption,
    admin_call,
    admin_request,
)
from rungway.cli.pool_table import pools_table
from rungway.cli.times import countdown, reset_phrase
from rungway.quota.limits import limit_of_detail
from rungway.routing.rungs import Rung

out = Console()
err = Console(stderr=True)
_BREAKER = {
    "closed": "[green]closed[/]",
    "half_open": "[yellow]half-open[/]",
    "open": "[red]open[/]",
}


def status(
    config: ConfigOption = None,
    url: UrlOption = None,
    admin_key_env: KeyEnvOption = "RUNGWAY_ADMIN_KEY",
) -> None:
    """Show the ladder: each rung's connections, quota windows and reset countdowns, health."""
    with err.status("asking the gateway for its ladder ..."):
        payload = admin_call("GET", "/admin/connections", config, url, admin_key_env)
        health = admin_call("GET", "/healthz", config, url, admin_key_env)
        # A gateway from before pools answers 404: its status is the ladder alone.
        pooled, pools = admin_request("GET", "/admin/pools", config, url, admin_key_env)
    # Count down on the gateway's clock, so a countdown means the same thing there and here.
    now = payload.get("now") or time.time()
    out.print(ladder_table(payload["connections"], now))
    accounts = pools_table(pools, now) if pooled == 200 else None
    if accounts is not None:
        out.print(accounts)
    for store in health.get("stores", ()):
        shown = "[green]up[/]" if store["up"] else "[bold red]degraded[/]"
        out.print(f"{escape(store['store'])}: {shown}: {escape(store['detail'])}", highlight=False)


def ladder_table(connections: list[dict[str, Any]], now: float) -> Table:
    """The five rungs, each with its connections' quota and health, as a rich table."""
    table = Table(title="the ladder", title_justify="left")
    for column in ("rung", "connection", "models", "billing", "quota", "cooldown", "breaker"):
        table.add_column(column)
    table.add_column("state")
    for rung in Rung:
        members = [
            (entry, [m["model"] for m in entry["models"] if m["rung"] == rung.label])
            for entry in connections
        ]
        members = [(entry, models) for entry, models in members if models]
        label = f"[bold]{int(rung)} {rung.label}[/]"
        if not members:
            table.add_row(label, "[dim]-[/]", *[""] * 6)
        for index, (entry, models) in enumerate(members):
            table.add_row(
                label if index == 0 else "",
                f"[bold]{escape(entry['id'])}[/]",
                escape("\n".join(models)),
                f"{entry['billing']} / {entry['overage']}{_overage(entry)}",
                "\n".join(_window(window, now) for window in entry["windows"])
                or "[dim]no reading[/]",
                _cooldown(entry, now),
                _BREAKER.get(entry["breaker"], entry["breaker"]),
                ("[red]disabled[/]" if entry.get("disabled") else "[green]enabled[/]")
                + _terms(entry),
            )
        table.add_section()
    return table


def _terms(entry: dict[str, Any]) -> str:
    # Which clients the plan serves, and the operator's choice past its terms if any.
    terms = entry.get("terms")
    if not terms:
        return ""
    color = "yellow" if terms["widened"] or terms["warning"] else "dim"
    said = f"\n[{color}]{escape(terms['note'])}[/]"
    return said + (f"\n[yellow]{escape(terms['warning'])}[/]" if terms["warning"] else "")


def _overage(entry: dict[str, Any]) -> str:
    # The account's own word (Copilot overage, Claude extra usage, Codex credits).
    if entry.get("overage_in_use"):
        return "\n[red]billing past its quota[/]"
    if entry.get("overage_permitted"):
        return "\n[yellow]can bill past its quota[/]"
    return ""


def _window(window: dict[str, Any], now: float) -> str:
    scope = escape(f" [{window['model']}]") if window["model"] else ""
    used = window["used_percent"]
    if window["status"] == "rejected":
        shown = "[red]exhausted[/]"
    elif used is None:
        shown = "? used"
    else:
        color = "red" if used >= 95 else "yellow" if used >= 80 else "green"
        shown = f"[{color}]{used:.0f}% used[/]"
    return f"{escape(window['name'])}{scope}: {shown}{reset_phrase(window['resets_at'], now)}"


def _cooldown(entry: dict[str, Any], now: float) -> str:
    until = entry["cooldown_until"]
    if not until:
        return "[dim]-[/]"
    said = entry["cooldown_reason"] or ""
    reason = f"\n{escape(said)}" if said else ""
    # Which limit it rests for: a minute's throttle, a spent window, a spent budget.
    limit = limit_of_detail(said)
    kind = f" [bold]{limit.value}[/]" if limit is not None else ""
    return f"[yellow]ends {countdown(until, now)}[/]{kind}{reason}"
