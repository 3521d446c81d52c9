"""What `rungway serve` says when it starts: where it listens, what it read, and the ladder."""

from __future__ import annotations

import logging
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from rungway.cli.plan_terms import terms_facts
from rungway.config import Settings
from rungway.routing.retired import RETIRED
from rungway.routing.rungs import Rung
from rungway.routing.snapshot import Roster

log = logging.getLogger("rungway.serve")


def facts(
    settings: Settings,
    roster: Roster,
    url: str,
    config: Path | None,
    ledger: Path,
    *,
    workers: int = 1,
) -> dict[str, Any]:
    """The start-up facts, as the JSON line carries them and the banner shows them."""
    ladder: dict[str, list[str]] = {rung.label: [] for rung in Rung}
    for connection in roster.connections.values():
        for rung in sorted({served.rung for served in connection.models}):
            models = [served.model for served in connection.models if served.rung is rung]
            ladder[rung.label].append(f"{connection.id} ({', '.join(models)})")
    budgets: dict[str, float | None] = {
        str(rung): usd for rung, usd in settings.ladder.rung_budget_usd.items()
    }
    return {
        "version": _version(),
        "url": url,
        "config": str(config) if config is not None else None,
        "ledger": str(ledger),
        "state": _state(settings),
        "workers": workers,
        "ladder": ladder,
        "budgets": {rung.label: budgets.get(rung.label) for rung in Rung if rung.paid},
        "budget_period": settings.ladder.budget_period,
        "client_keys": len(settings.client_keys),
        # Connections of a provider whose service is gone for most of its users.
        "retired": {
            c.id: RETIRED[c.provider].notice for c in settings.connections if c.provider in RETIRED
        },
        # Which clients each plan serves, by its terms or its operator's choice.
        "terms": terms_facts(roster, len(settings.client_keys)),
        "dashboard": f"{url}/dashboard",
        "metrics": f"{url}/metrics",
    }


def show(facts: dict[str, Any], *, json_lines: bool, console: Console) -> None:
    """The banner on `console`, or one structured `listening` log line for log shippers."""
    if json_lines:
        log.info("listening on %s", facts["url"], extra={"fields": {"event": "start", **facts}})
        return
    console.print(_text(facts), highlight=False, soft_wrap=True)


def _text(facts: dict[str, Any]) -> str:
    lines = [
        f"[bold]rungway {facts['version']}[/] listening on [bold cyan]{facts['url']}[/]",
        f"  [bold]config[/]     {escape(facts['config'] or 'none')}",
        f"  [bold]ledger[/]     {escape(facts['ledger'])}",
        f"  [bold]state[/]      {escape(facts['state'])}",
    ]
    if facts["workers"] > 1:
        lines.append(f"  [bold]workers[/]    {facts['workers']} processes")
    width = max(len(rung) for rung in facts["ladder"])
    for index, (rung, members) in enumerate(facts["ladder"].items()):
        label = "  [bold]ladder[/]     " if index == 0 else " " * 13
        shown = escape(", ".join(members)) if members else "[dim]-[/]"
        budget = _budget(rung, facts)
        lines.append(f"{label}{rung:<{width}}  {shown}" + (f"; {budget}" if budget else ""))
    for connection_id, notice in facts["retired"].items():
        lines.append(f"  [bold]retired[/]    [yellow]{escape(connection_id)}: {escape(notice)}[/]")
    for index, (connection_id, said) in enumerate(facts["terms"].items()):
        label = "  [bold]terms[/]      " if index == 0 else " " * 13
        lines.append(f"{label}{escape(connection_id)}: {escape(str(said['note']))}")
        if said["warning"]:
            lines.append(f"{' ' * 13}[yellow]{escape(connection_id)}: {escape(said['warning'])}[/]")
    keys = facts["client_keys"]
    clients = f"{keys} client keys" if keys else "any key, from this machine only (no client_keys)"
    lines += [
        f"  [bold]clients[/]    {clients}",
        f"  [bold]dashboard[/]  [cyan]{facts['dashboard']}[/]",
        f"  [bold]metrics[/]    {facts['metrics']}",
    ]
    return "\n".join(lines)


def _state(settings: Settings) -> str:
    state = settings.state
    if state.store == "redis" and state.redis is not None:
        shared = f"redis, keys under {state.redis.prefix}:"
        postgres = settings.ledger.postgres
        return shared + ("; ledger rows drain into postgres" if postgres is not None else "")
    if state.store == "memory":
        return "memory (forgotten at exit)"
    return f"embedded ({state.path or 'beside the ledger'})"


def _budget(rung: str, facts: dict[str, Any]) -> str:
    if rung not in facts["budgets"] or not facts["ladder"][rung]:
        return ""
    amount = facts["budgets"][rung]
    if amount is None:
        return "[yellow]no budget: spends without limit[/]"
    if amount == 0:
        return "[dim]budget 0: not used[/]"
    return f"budget ${amount:,.2f} a {facts['budget_period']}"


def _version() -> str:
    try:
        return version("rungway")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"
