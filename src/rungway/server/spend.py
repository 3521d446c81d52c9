"""The body of `GET /admin/spend`: the ledger's spend over a period, and the budgets' use.

Three parts: the ledger's rows over the asked period grouped one way (with a total), each
rung budget's live spent and held amounts in the ladder's budget period, and each client
key's spend in its own budget period next to its budget.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar, get_args
from urllib.parse import parse_qs

from rungway.budget.period import Period, period_bounds
from rungway.config import ClientKeyConfig
from rungway.ledger.report import DIMENSIONS, Dimension, SpendReport, SpendRow
from rungway.routing.rungs import Rung
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import RungSpend

PERIODS: tuple[Period, ...] = get_args(Period)
RungSpendOf = Callable[[float], Mapping[Rung, RungSpend]]
"""Spent and held amounts per rung in the current budget period (the live budget's)."""
_Choice = TypeVar("_Choice", bound=str)


class SpendSource(Protocol):
    """A ledger that can report its spend."""

    def spend_report(self, since: float, until: float, by: Dimension) -> SpendReport:
        """Requests, tokens and costs from `since` to `until`, grouped by `by`."""
        ...


class BadSpendQuery(ValueError):
    """The query string asks for a grouping or period that does not exist."""


def parse_spend_query(query_string: bytes) -> tuple[Dimension, Period]:
    """`by` and `period` from a query string; `rung` and `month` when absent."""
    fields = parse_qs(query_string.decode("latin-1"), keep_blank_values=True)
    unknown = sorted(set(fields) - {"by", "period"})
    if unknown:
        raise BadSpendQuery(f"unknown query parameter {unknown[0]!r}; use `by` and `period`")
    by = _one(fields, "by", "rung", DIMENSIONS)
    period = _one(fields, "period", "month", PERIODS)
    return by, period


def _one(
    fields: dict[str, list[str]], name: str, default: _Choice, allowed: Iterable[_Choice]
) -> _Choice:
    values = fields.get(name, [default])
    # Answer the allowed value itself, not the query's string, so it keeps its Literal type.
    choices = {value: value for value in allowed}
    if len(values) != 1 or values[0] not in choices:
        shown = ", ".join(choices)
        raise BadSpendQuery(f"`{name}` must be one of {shown}; got {', '.join(values)!r}")
    return choices[values[0]]


class SpendBook:
    """Builds the spend body from the ledger, the ladder's budgets and the client keys."""

    def __init__(
        self,
        *,
        ledger: SpendSource,
        ladder: LadderSettings,
        client_keys: Iterable[ClientKeyConfig],
        rung_spend: RungSpendOf,
    ) -> None:
        self._ledger = ledger
        self._ladder = ladder
        self._keys = tuple(client_keys)
        self._rung_spend = rung_spend

    async def body(self, by: Dimension, period: Period, now: float) -> dict[str, Any]:
        """The whole `/admin/spend` answer for `by` over the `period` holding `now`."""
        since, until = period_bounds(period, now)
        # Ledger reads touch the disk (and wait for queued rows): off the event loop.
        report = await asyncio.to_thread(self._ledger.spend_report, since, until, by)
        return {
            "by": by,
            "period": period,
            "since": since,
            "until": until,
            "rows": [_row(row) for row in report.rows],
            "total": _row(report.total),
            "budgets": self._rung_budgets(now),
            "keys": await self._key_budgets(now),
        }

    def _rung_budgets(self, now: float) -> dict[str, Any]:
        since, until = period_bounds(self._ladder.budget_period, now)
        live = self._rung_spend(now)
        rungs = []
        for rung in Rung:
            budget = self._ladder.budget_for(rung)
            if budget is None:
                continue
            spend = live.get(rung, RungSpend(0.0))
            rungs.append(
                {
                    "rung": rung.label,
                    "budget_usd": budget,
                    "spent_usd": spend.spent_usd,
                    "reserved_usd": spend.reserved_usd,
                    "used_percent": _percent(spend.spent_usd + spend.reserved_usd, budget),
                }
            )
        return {
            "period": self._ladder.budget_period,
            "since": since,
            "until": until,
            "rungs": rungs,
        }

    async def _key_budgets(self, now: float) -> list[dict[str, Any]]:
        reports: dict[Period, SpendReport] = {}
        for period in {key.budget_period for key in self._keys}:
            since, until = period_bounds(period, now)
            reports[period] = await asyncio.to_thread(
                self._ledger.spend_report, since, until, "key"
            )
        keys = []
        for key in self._keys:
            report = reports[key.budget_period]
            spent = report.row(key.name)
            keys.append(
                {
                    "key": key.name,
                    "budget_usd": key.budget_usd,
                    "period": key.budget_period,
                    "since": report.since,
                    "until": report.until,
                    "requests": spent.requests,
                    "cost_usd": spent.cost_usd,
                    "used_percent": _percent(spent.cost_usd, key.budget_usd),
                }
            )
        return keys


def _row(row: SpendRow) -> dict[str, Any]:
    return {
        "group": row.group,
        "requests": row.requests,
        "input_tokens": row.input_tokens,
        "output_tokens": row.output_tokens,
        "reasoning_tokens": row.reasoning_tokens,
        "cost_usd": row.cost_usd,
        "list_cost_usd": row.list_cost_usd,
        "savings_usd": row.savings_usd,
        "unpriced_requests": row.unpriced_requests,
        "unrecorded_requests": row.unrecorded_requests,
        "unrecorded_usd": row.unrecorded_usd,
        "cache_read_tokens": row.cache_read_tokens,
        "cache_hit_share": row.cache_hit_share,
    }


def _percent(used: float, budget: float | None) -> float | None:
    # A budget of 0 disables its rung or key: there is no share of it to show.
    return 100.0 * used / budget if budget else None
