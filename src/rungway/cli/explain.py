"""`rungway explain REQUEST_ID`: why a request went where it did."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from rungway.app import default_ledger_path
from rungway.config import ConfigError, load_settings
from rungway.ledger.sqlite import read_row

out = Console()
err = Console(stderr=True)


def explain(
    request_id: Annotated[str, typer.Argument(help="The x-rungway-request-id (or a prefix).")],
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="Read the ledger path from here.")
    ] = None,
    ledger: Annotated[Path | None, typer.Option(help="The ledger file itself.")] = None,
) -> None:
    """Show a request's route plan: every candidate, every skip and every attempt."""
    path = ledger or _ledger_from(config)
    if not path.exists():
        err.print(f"[red]no ledger at {path}[/]; pass --ledger or --config")
        raise typer.Exit(2)
    row = read_row(path, request_id)
    if row is None:
        err.print(f"[red]no single request matches {request_id!r} in {path}[/]")
        raise typer.Exit(1)
    _render(row)


def _ledger_from(config: Path | None) -> Path:
    if config is None:
        return default_ledger_path()
    try:
        settings = load_settings(config)
    except ConfigError as error:
        err.print(f"[red]{error}[/]")
        raise typer.Exit(2) from None
    return settings.ledger.path or default_ledger_path()


def _render(row: dict[str, Any]) -> None:
    started = dt.datetime.fromtimestamp(row["started_at"], dt.UTC).isoformat(timespec="seconds")
    served = row["connection_id"] or "nothing"
    out.print(
        f"[bold]{row['request_id']}[/] at {started}: [cyan]{row['requested_model']}[/] "
        f"-> {row['resolved_model']}, served by [bold]{served}[/]"
        + (f" on rung [bold]{row['rung']}[/]" if row["rung"] else "")
        + f", outcome {row['outcome']} (HTTP {row['status']}), {row['latency_ms']:.0f} ms",
        highlight=False,
    )
    out.print(
        f"tokens: {row['input_tokens']} in, {row['output_tokens']} out, "
        f"{row['cache_read_tokens']} cache read, {row['cache_write_tokens']} cache write",
        highlight=False,
    )
    plan = row["plan"] or {}
    if plan.get("ladder"):
        category = f", category {plan['category']}" if plan.get("category") else ""
        out.print(f"ladder: auto/{plan['ladder']}{category}", highlight=False)
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
        for column in ("connection", "outcome", "status", "ms", "detail"):
            attempts.add_column(column)
        for attempt in row["attempts"]:
            attempts.add_row(
                attempt["connection_id"],
                attempt["outcome"],
                str(attempt["status"] or ""),
                f"{attempt['latency_ms']:.0f}",
                attempt["detail"],
            )
        out.print(attempts)
