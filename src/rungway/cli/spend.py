"""`rungway spend`: what a running gateway's requests cost and saved, through its admin API;
with no gateway answering, from the cluster's PostgreSQL ledger when the config names one."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rungway.budget.period import Period
from rungway.cli.admin_client import (
    ConfigOption,
    GatewayUnreachable,
    KeyEnvOption,
    UrlOption,
    admin_request,
    checked,
)
from rungway.cli.ledger_source import configured, postgres_reader, spend_from_postgres
from rungway.ledger.report import Dimension

err = Console(stderr=True)
_COUNTS = ("requests", "input_tokens", "output_tokens", "reasoning_tokens")
_MONEY = ("cost_usd", "list_cost_usd", "savings_usd")
_HEADERS = (
    "requests",
    "input tok",
    "output tok",
    "reasoning tok",
    "cache hits",
    "cost",
    "list price",
    "saved",
)
_THIS = {"day": "today", "week": "this week", "month": "this month"}


def spend(
    *,
    by: Annotated[
        Dimension, typer.Option("--by", help="Group by rung, connection, client key or model.")
    ] = "rung",
    period: Annotated[
        Period, typer.Option("--period", help="This UTC day, week (from Monday) or month.")
    ] = "month",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the admin endpoint's JSON as it is.")
    ] = False,
    config: ConfigOption = None,
    url: UrlOption = None,
    admin_key_env: KeyEnvOption = "RUNGWAY_ADMIN_KEY",
) -> None:
    """Show requests, tokens, cache-hit share, incremental and list-price cost, savings and
    budgets used."""
    payload = _spend_payload(by, period, config, url, admin_key_env)
    # Sized when the command runs, so the table takes the terminal's width at that moment.
    shown = Console()
    if as_json:
        typer.echo(json.dumps(payload, indent=2))
        return
    shown.print(_spend_table(payload))
    unpriced = payload["total"]["unpriced_requests"]
    if unpriced:
        shown.print(
            f"{unpriced} requests had no list price: they count in cost, "
            "not in list price or savings",
            highlight=False,
        )
    unrecorded = payload["total"]["unrecorded_requests"]
    if unrecorded:
        shown.print(
            f"{unrecorded} requests were in flight when the gateway stopped abruptly: perhaps "
            f"billed, never recorded; they count at their ceiling, "
            f"{money(payload['total']['unrecorded_usd'])}, in cost and against the budgets "
            "until reconciled with the provider's bill",
            highlight=False,
        )
    budgets = payload["budgets"]
    if budgets["rungs"]:
        shown.print(_rung_budget_table(budgets))
    if any(key["budget_usd"] is not None for key in payload["keys"]):
        shown.print(_key_budget_table(payload["keys"]))


def _spend_payload(
    by: Dimension, period: Period, config: Path | None, url: str | None, key_env: str
) -> Any:
    path = f"/admin/spend?by={by}&period={period}"
    try:
        status, payload = admin_request("GET", path, config, url, key_env)
    except GatewayUnreachable as error:
        # Without a gateway the cluster's ledger still answers, when the config names it.
        settings = configured(config) if url is None else None
        reader = postgres_reader(settings)
        if settings is None or reader is None:
            err.print(f"[red]{escape(str(error))}[/]", highlight=False)
            raise typer.Exit(1) from None
        err.print(
            f"{escape(str(error))}; reading the ledger in postgres at {reader.address} "
            "(budgets show settled spend: what is held lives in the running gateways)",
            highlight=False,
        )
        return spend_from_postgres(reader, settings, by, period)
    return checked("GET", path, status, payload)


def _spend_table(payload: dict[str, Any]) -> Table:
    title = f"spend by {payload['by']}, {_THIS[payload['period']]} ({_span(payload)})"
    table = Table(title=title, title_justify="left", min_width=len(title))
    table.add_column(payload["by"])
    for header in _HEADERS:
        table.add_column(header, justify="right")
    rows = payload["rows"]
    for index, row in enumerate(rows):
        table.add_row(*_cells(row), end_section=index == len(rows) - 1)
    table.add_row(*_cells(payload["total"]), style="bold")
    return table


def _cells(row: dict[str, Any]) -> list[str]:
    return [
        row["group"],
        *(f"{row[name]:,}" for name in _COUNTS),
        _share(row.get("cache_hit_share")),
        *(money(row[name]) for name in _MONEY),
    ]


def _share(share: float | None) -> str:
    # The share of input read from a prompt cache; a gateway that predates it sends none.
    return "-" if share is None else f"{100 * share:.1f}%"


def _rung_budget_table(budgets: dict[str, Any]) -> Table:
    title = f"rung budgets, {_THIS[budgets['period']]} ({_span(budgets)})"
    table = Table(title=title, title_justify="left", min_width=len(title))
    table.add_column("rung")
    for header in ("budget", "spent", "held", "used"):
        table.add_column(header, justify="right")
    for entry in budgets["rungs"]:
        table.add_row(
            entry["rung"],
            money(entry["budget_usd"]),
            money(entry["spent_usd"]),
            money(entry["reserved_usd"]),
            _used(entry["used_percent"]),
        )
    return table


def _key_budget_table(keys: list[dict[str, Any]]) -> Table:
    table = Table(title="client key budgets", title_justify="left")
    table.add_column("key")
    table.add_column("period")
    for header in ("requests", "budget", "spent", "used"):
        table.add_column(header, justify="right")
    for entry in keys:
        budget = entry["budget_usd"]
        table.add_row(
            entry["key"],
            f"{entry['period']} ({_span(entry)})",
            f"{entry['requests']:,}",
            "-" if budget is None else money(budget),
            money(entry["cost_usd"]),
            "-" if budget is None else _used(entry["used_percent"]),
        )
    return table


def money(value: float) -> str:
    """US dollars to the micro-dollar, without trailing zeros past the cents: $0.001234."""
    digits = f"{abs(value):,.6f}".rstrip("0")
    whole, _, fraction = digits.partition(".")
    sign = "-" if value < 0 and digits.strip("0.,") else ""
    return f"{sign}${whole}.{fraction.ljust(2, '0')}"


def _used(percent: float | None) -> str:
    # The endpoint gives no share of a budget of 0: that rung or key is switched off.
    if percent is None:
        return "disabled"
    # Micro-dollar spend against a budget of dollars must not read as nothing at all.
    return f"{percent:.2g}%" if 0 < percent < 1 else f"{percent:.1f}%"


def _span(part: dict[str, Any]) -> str:
    first = dt.datetime.fromtimestamp(part["since"], dt.UTC).date()
    # `until` is the next period's first instant; the last day shown is the one before it.
    last = dt.datetime.fromtimestamp(part["until"] - 1, dt.UTC).date()
    return f"{first} UTC" if first == last else f"{first} to {last} UTC"
