"""`rungway explain REQUEST_ID`: why a request went where it did.

The row comes from the running gateway's admin API when one answers, else from the
cluster's PostgreSQL ledger when the config names one, else from the ledger file; `--url`
asks only the gateway, `--ledger` reads only the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rungway.cli.admin_client import (
    GatewayUnreachable,
    KeyEnvOption,
    UrlOption,
    admin_request,
    error_message,
)
from rungway.cli.config_file import ConfigOption
from rungway.cli.ledger_source import configured, fail, postgres_reader
from rungway.cli.times import iso_time
from rungway.ledger.report import LedgerUnavailable
from rungway.ledger.sqlite import read_matching
from rungway.quota.limits import LimitKind, limit_of_detail
from rungway.server.requests import MAX_MATCHES, request_detail
from rungway.stores import default_ledger_path

if TYPE_CHECKING:
    from rungway.ledger.postgres import PostgresReader

out = Console()
err = Console(stderr=True)

_REFUSAL_LIMITS = {
    "budget_exhausted": LimitKind.BUDGET,
    "rate_limit_exceeded": LimitKind.THROTTLE,
    "subscription_unavailable": LimitKind.WINDOW,
    "connections_resting": LimitKind.WINDOW,
}
"""The limit each of the gateway's own 429 refusals stands for."""


def explain(
    request_id: Annotated[
        str, typer.Argument(help="The x-rungway-request-id, or its first 6 to 8 characters.")
    ],
    config: ConfigOption = None,
    url: UrlOption = None,
    ledger: Annotated[
        Path | None, typer.Option(help="Read this ledger file, not the running gateway.")
    ] = None,
    admin_key_env: KeyEnvOption = "RUNGWAY_ADMIN_KEY",
) -> None:
    """Show a request's route plan: every candidate, every skip and every attempt."""
    prefix = request_id.strip().lower()
    if not prefix:
        err.print("[red]give a request id or the first characters of one[/]")
        raise typer.Exit(2)
    if ledger is None:
        try:
            status, payload = admin_request(
                "GET", f"/admin/requests/{prefix}", config, url, admin_key_env
            )
        except GatewayUnreachable as error:
            if url is not None:
                err.print(f"[red]{escape(str(error))}[/]", highlight=False)
                raise typer.Exit(1) from None
            settings = configured(config)
            reader = postgres_reader(settings)
            if reader is not None:
                _from_postgres(prefix, reader)
                return
            ledger = (settings.ledger.path if settings else None) or default_ledger_path()
        else:
            _from_gateway(prefix, status, payload)
            return
    _from_file(prefix, ledger)


def _from_gateway(prefix: str, status: int, payload: Any) -> None:
    if status == 200:
        _render(payload)
    elif status == 409:
        _list_matches(prefix, payload["matches"], more=payload.get("truncated", False))
    else:
        err.print(f"[red]{escape(error_message(payload))}[/] (HTTP {status})", highlight=False)
        raise typer.Exit(1)


def _from_file(prefix: str, path: Path) -> None:
    if not path.exists():
        err.print(
            f"[red]no gateway answered and there is no ledger at {escape(str(path))}[/]; "
            "start the gateway, or pass --url, --ledger or --config",
            highlight=False,
        )
        raise typer.Exit(2)
    rows = read_matching(path, prefix, MAX_MATCHES + 1)
    if not rows:
        err.print(f"[red]no request id starts with {prefix!r} in {escape(str(path))}[/]")
        raise typer.Exit(1)
    if len(rows) > 1:
        _list_matches(prefix, rows[:MAX_MATCHES], more=len(rows) > MAX_MATCHES)
    _render(request_detail(rows[0]))


def _from_postgres(prefix: str, reader: PostgresReader) -> None:
    try:
        rows = reader.matching(prefix, MAX_MATCHES + 1)
    except LedgerUnavailable as error:
        fail(error)
    if not rows:
        err.print(f"[red]no request id starts with {prefix!r} in postgres at {reader.address}[/]")
        raise typer.Exit(1)
    if len(rows) > 1:
        _list_matches(prefix, rows[:MAX_MATCHES], more=len(rows) > MAX_MATCHES)
    _render(request_detail(rows[0]))


def _list_matches(prefix: str, rows: list[dict[str, Any]], *, more: bool) -> NoReturn:
    count = f"more than {len(rows)}" if more else str(len(rows))
    table = Table(
        title=f"{count} requests start with {prefix!r}: give more of the id",
        title_justify="left",
    )
    for column in ("request id", "started (UTC)", "model", "served by", "status"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["request_id"],
            iso_time(row["started_at"]),
            row["requested_model"],
            row["connection_id"] or "nothing",
            str(row["status"]),
        )
    err.print(table)
    raise typer.Exit(1)


def _usd(amount: float | None) -> str:
    return "unknown" if amount is None else f"${amount:.6f}"


def _render(row: dict[str, Any]) -> None:
    started = iso_time(row["started_at"])
    served = row["connection_id"] or "nothing"
    out.print(
        f"[bold]{row['request_id']}[/] at {started}: [cyan]{row['requested_model']}[/] "
        f"-> {row['resolved_model']}, served by [bold]{served}[/]"
        + (f" on rung [bold]{row['rung']}[/]" if row["rung"] else "")
        + f", outcome {row['outcome']} (HTTP {row['status']}), {row['latency_ms']:.0f} ms",
        highlight=False,
    )
    tokens = row["tokens"]
    out.print(
        f"tokens: {tokens['input']} in, {tokens['output']} out, "
        f"{tokens['cache_read']} cache read, {tokens['cache_write']} cache write; "
        f"cost {_usd(row['cost_usd'])}, at list price {_usd(row['list_cost_usd'])}",
        highlight=False,
    )
    plan = row["plan"] or {}
    if plan.get("ladder"):
        category = f", category {plan['category']}" if plan.get("category") else ""
        out.print(f"ladder: auto/{plan['ladder']}{category}", highlight=False)
    if plan.get("pinned"):
        out.print(f"pinned to {plan['pinned']} (session)", highlight=False)
    for line in _limit_lines(row, plan):
        out.print(line, highlight=False)
    candidates = Table(title="candidates, in the order tried", title_justify="left")
    for column in ("#", "rung", "provider/model", "connections", "score"):
        candidates.add_column(column)
    for index, candidate in enumerate(plan.get("candidates", []), start=1):
        candidates.add_row(
            str(index),
            candidate["rung"],
            f"{candidate['provider']}/{candidate['model']}",
            ", ".join(candidate["connections"]),
            f"{candidate['score']:.3f}",
        )
    out.print(candidates)
    if plan.get("skipped"):
        skipped = Table(title="skipped", title_justify="left")
        for column in ("connection / model / rung", "reason", "detail"):
            skipped.add_column(column)
        for skip in plan["skipped"]:
            subject = " ".join(
                part for part in (skip["connection"], skip["model"], skip["rung"]) if part
            )
            skipped.add_row(subject, skip["reason"], skip["detail"])
        out.print(skipped)
    if row["attempts"]:
        attempts = Table(title="failed attempts", title_justify="left")
        for column in ("connection", "outcome", "limit", "status", "ms", "detail"):
            attempts.add_column(column)
        for attempt in row["attempts"]:
            limit = limit_of_detail(attempt["detail"] or "")
            attempts.add_row(
                attempt["connection_id"],
                attempt["outcome"],
                limit.value if limit is not None else "",
                str(attempt["status"] or ""),
                f"{attempt['latency_ms']:.0f}",
                attempt["detail"],
            )
        out.print(attempts)


def _limit_lines(row: dict[str, Any], plan: dict[str, Any]) -> list[str]:
    """What limit turned the request away (or held it), in words: a wait for a plan's
    reset, the gateway's own 429, and the limit of each attempt that hit one."""
    lines: list[str] = []
    waited = plan.get("waited_s")
    if waited:
        lines.append(f"waited: held {waited:.1f}s for a plan's reset instead of paying or refusing")
    refused = _REFUSAL_LIMITS.get(row["outcome"])
    if refused is not None and row["status"] == 429:
        lines.append(f"limit: {refused.value} ({refused.meaning})")
    seen: set[LimitKind] = set() if refused is None else {refused}
    for attempt in row["attempts"] or ():
        limit = limit_of_detail(attempt["detail"] or "")
        if limit is not None and limit not in seen:
            seen.add(limit)
            lines.append(f"limit: {limit.value} at {attempt['connection_id']} ({limit.meaning})")
    return lines
