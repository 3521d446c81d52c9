"""`rungway whatif`'s report: the trace, the plans, each policy's figures and the comparison."""

from __future__ import annotations

import datetime as dt
import math

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rungway.cli.spend import money
from rungway.whatif.metrics import RunMetrics
from rungway.whatif.trace import Trace

__all__ = ["print_report", "span"]


def print_report(  # noqa: PLR0917 - what the report shows
    out: Console,
    figures: list[RunMetrics],
    trace: Trace,
    source: str,
    plans: list[str],
    notes: list[str],
    elapsed: float,
) -> None:
    """The trace and plans replayed, each policy's figures, then all of them compared."""
    shown = span(trace)
    out.print(
        f"{len(trace):,} requests from {escape(source)}, {shown['from']} to {shown['to']};"
        f" replayed in {elapsed:.1f} s",
        highlight=False,
    )
    for line in plans:
        out.print(f"  plan {escape(line)}", highlight=False)
    for note in notes:
        out.print(f"  [dim]{escape(note)}[/]", highlight=False)
    for figure in figures:
        out.print(_policy_table(figure))
    out.print(_comparison(figures))


def _policy_table(figure: RunMetrics) -> Table:
    table = Table(title=f"policy: {figure.policy}", title_justify="left", show_header=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("paid spend", money(figure.paid_usd))
    table.add_row("at list price", money(figure.list_usd))
    table.add_row("paid / oracle", _ratio(figure.ratio_to_oracle))
    for rung, count in sorted(figure.per_rung.items()):
        table.add_row(f"requests on {rung}", f"{count:,}")
    for use in figure.utilisation:
        table.add_row(
            f"{use.connection_id} {use.window} used",
            f"{use.mean:.0%} mean, {use.peak:.0%} peak, {use.instances} windows",
        )
    table.add_row(
        "re-entry lag",
        f"{len(figure.lags)} resets, max {figure.max_lag_requests} requests /"
        f" {figure.max_lag_seconds:.0f} s",
    )
    table.add_row("flaps", str(figure.flaps))
    table.add_row("budget refusals", f"{figure.budget_refusals:,}")
    other = sum(figure.refusals.values()) - figure.budget_refusals
    if other:
        table.add_row("other refusals", f"{other:,}")
    return table


def _comparison(figures: list[RunMetrics]) -> Table:
    table = Table(title="compared", title_justify="left")
    for header in ("policy", "paid", "list price", "/ oracle", "max lag", "flaps", "refused"):
        table.add_column(header, justify="left" if header == "policy" else "right")
    for figure in figures:
        table.add_row(
            figure.policy,
            money(figure.paid_usd),
            money(figure.list_usd),
            _ratio(figure.ratio_to_oracle),
            f"{figure.max_lag_requests} req",
            str(figure.flaps),
            f"{sum(figure.refusals.values()):,}",
        )
    return table


def _ratio(value: float | None) -> str:
    if value is None:
        return "-"
    return "inf" if math.isinf(value) else f"{value:.3f}"


def span(trace: Trace) -> dict[str, str]:
    """The trace's first and last request times, in UTC ("-" when empty)."""
    if not trace:
        return {"from": "-", "to": "-"}
    return {"from": _utc(trace[0].at), "to": _utc(trace[-1].at)}


def _utc(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
