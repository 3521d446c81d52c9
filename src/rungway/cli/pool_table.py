"""The accounts table of `rungway status`: each plan's accounts, grouped by pool.

One row per account (a plan's connection), under its pool (the plans of one provider,
billing entry and owner): each quota window's used share, reset countdown and burn rate
(percent of the window per hour), when the binding window runs out at that rate (or that
it resets first), the sessions pinned to the account and its share of cache hits today.
It renders the body of `GET /admin/pools`.
"""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from rungway.cli.times import countdown, reset_phrase

_COLUMNS = ("pool", "account", "windows", "burn", "runs out", "pinned", "cache hits")


def pools_table(body: dict[str, Any], now: float) -> Table | None:
    """The accounts of every pool as a rich table; None when the gateway has no plans."""
    pools = body.get("pools") or []
    if not pools:
        return None
    table = Table(title="the plans' accounts, by pool", title_justify="left")
    for column in _COLUMNS:
        table.add_column(column, justify="right" if column in ("pinned", "cache hits") else "left")
    for pool in pools:
        label = escape(pool["pool"]) + f" [dim]({len(pool['accounts'])})[/]"
        for index, account in enumerate(pool["accounts"]):
            windows = account["windows"]
            table.add_row(
                f"[bold]{label}[/]" if index == 0 else "",
                f"[bold]{escape(account['id'])}[/]" + _resting(account, now),
                "\n".join(_window(window, now) for window in windows) or "[dim]no reading[/]",
                "\n".join(_burn(window) for window in windows) or "[dim]-[/]",
                runs_out(account.get("binding"), now),
                _pinned(account["pinned_sessions"]),
                _share(account["cache_hit_share"]),
            )
        table.add_section()
    return table


def runs_out(binding: dict[str, Any] | None, now: float) -> str:
    """When the account's binding window runs out, or that it resets first."""
    if binding is None:
        return "[dim]unknown: fewer than two readings[/]"
    name = escape(binding["window"] + (f" [{binding['model']}]" if binding["model"] else ""))
    at = binding["at"]
    match binding["outlook"]:
        case "exhausted":
            resets = f", resets {countdown(at, now)}" if at else ""
            return f"[red]{name} exhausted{resets}[/]"
        case "runs_out":
            color = "red" if at - now < 3600 else "yellow"
            return f"[{color}]{name} {countdown(at, now)}[/]"
        case "not_before_reset":
            resets = f" ({name} resets {countdown(at, now)})" if at else ""
            return f"[green]not before reset[/]{resets}"
    return "[dim]unknown: fewer than two readings[/]"


def _resting(account: dict[str, Any], now: float) -> str:
    if account.get("disabled"):
        return "\n[red]disabled[/]"
    until = account.get("cooldown_until")
    return f"\n[yellow]cooling down, ends {countdown(until, now)}[/]" if until else ""


def _window(window: dict[str, Any], now: float) -> str:
    scope = escape(f" [{window['model']}]") if window["model"] else ""
    used = window["used_percent"]
    if window["status"] == "rejected":
        shown = "[red]exhausted[/]"
    elif used is None:
        shown = "? used"
    else:
        shown = f"{used:.0f}% used"
    return f"{escape(window['name'])}{scope}: {shown}{reset_phrase(window['resets_at'], now)}"


def _burn(window: dict[str, Any]) -> str:
    rate = window["burn_per_hour"]
    name = escape(window["name"])
    return f"{name}: [dim]-[/]" if rate is None else f"{name}: {rate:.1f}%/h"


def _pinned(count: int | None) -> str:
    return "[dim]-[/]" if count is None else str(count)


def _share(share: float | None) -> str:
    return "[dim]-[/]" if share is None else f"{share * 100:.0f}%"
