"""What a policy's run comes to: spend, plan use, rungs, re-entry lag, flaps and refusals.

Everything is read from a `PolicyRun` alone (its placements, its arrival times and its plan
windows' instances); the ratio to the oracle takes the oracle's run too, and divides by
its proven lower bound (`bound_usd`) when it has one, else by what its placements paid. The
plan connections are those with window instances in the run.

- Re-entry lag: at each reset of a plan window (an instance's end) that found the policy
  off that plan (the last request before it went elsewhere), the requests and the
  seconds from the first request after the reset to the first one the policy put back on
  the plan. A reset after which the policy came back only past the plan's next reset is
  not counted: another window kept the plan shut. Only resets that more requests followed
  count; a policy that never came back, with no later reset, is counted to the trace's end.
- Flaps: returns to a plan after leaving it that no reset of one of its windows explains.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rungway.routing.rungs import Rung
from rungway.whatif.outcome import PolicyRun, WindowUse

__all__ = ["Lag", "RunMetrics", "WindowUtilisation", "measure", "ratio"]


@dataclass(frozen=True, slots=True)
class WindowUtilisation:
    """How full one plan window's instances were."""

    connection_id: str
    window: str
    instances: int
    mean: float
    """Mean share of capacity used per instance (0..1, above 1 past capacity)."""
    peak: float


@dataclass(frozen=True, slots=True)
class Lag:
    """Re-entry after one reset: the requests and seconds until the plan was used again."""

    connection_id: str
    window: str
    reset_at: float
    requests: int
    seconds: float


@dataclass(frozen=True)
class RunMetrics:
    """One policy's figures."""

    policy: str
    requests: int
    paid_usd: float
    list_usd: float
    served_list_usd: float
    """List price of the requests that were served, wherever they went."""
    per_rung: dict[str, int]
    refusals: dict[str, int]
    utilisation: tuple[WindowUtilisation, ...]
    lags: tuple[Lag, ...]
    flaps: int
    ratio_to_oracle: float | None = None
    per_connection: dict[str, int] = field(default_factory=dict)

    @property
    def budget_refusals(self) -> int:
        """Requests refused because a budget could not take them."""
        return self.refusals.get("budget_exhausted", 0)

    @property
    def max_lag_requests(self) -> int:
        """The longest re-entry lag, in requests (0 without resets)."""
        return max((lag.requests for lag in self.lags), default=0)

    @property
    def max_lag_seconds(self) -> float:
        """The longest re-entry lag, in seconds (0 without resets)."""
        return max((lag.seconds for lag in self.lags), default=0.0)

    def to_json(self) -> dict[str, Any]:
        """A plain JSON object for `--json`."""
        return {
            "policy": self.policy,
            "requests": self.requests,
            "paid_usd": self.paid_usd,
            "list_usd": self.list_usd,
            "served_list_usd": self.served_list_usd,
            # JSON has no infinity: a policy that pays over a free optimum has no ratio.
            "ratio_to_oracle": (
                None
                if self.ratio_to_oracle is None or math.isinf(self.ratio_to_oracle)
                else self.ratio_to_oracle
            ),
            "per_rung": self.per_rung,
            "per_connection": self.per_connection,
            "refusals": self.refusals,
            "budget_refusals": self.budget_refusals,
            "utilisation": [
                {
                    "connection_id": u.connection_id,
                    "window": u.window,
                    "instances": u.instances,
                    "mean": u.mean,
                    "peak": u.peak,
                }
                for u in self.utilisation
            ],
            "reentry_lag": {
                "resets": len(self.lags),
                "max_requests": self.max_lag_requests,
                "max_seconds": self.max_lag_seconds,
                "total_requests": sum(lag.requests for lag in self.lags),
                "each": [
                    {
                        "connection_id": lag.connection_id,
                        "window": lag.window,
                        "reset_at": lag.reset_at,
                        "requests": lag.requests,
                        "seconds": lag.seconds,
                    }
                    for lag in self.lags
                ],
            },
            "flaps": self.flaps,
        }


def ratio(paid: float, oracle_paid: float) -> float:
    """Paid spend over the oracle's: 1 when both are 0, infinite over a free optimum."""
    if oracle_paid <= 0:
        return 1.0 if paid <= 1e-12 else math.inf
    return paid / oracle_paid


def _oracle_paid(oracle: PolicyRun) -> float:
    """The least paid spend the oracle proves: its bound, else its placements' spend."""
    if oracle.bound_usd is not None:
        return oracle.bound_usd
    return math.fsum(p.cost_usd for p in oracle.placements)


def measure(run: PolicyRun, oracle: PolicyRun | None = None) -> RunMetrics:
    """The figures of `run`, and its paid spend over the oracle's when `oracle` is given."""
    placements = run.placements
    paid = math.fsum(p.cost_usd for p in placements)
    per_rung: Counter[str] = Counter()
    per_connection: Counter[str] = Counter()
    refusals: Counter[str] = Counter()
    for placement in placements:
        if placement.connection_id is None:
            refusals[placement.refusal or "refused"] += 1
            continue
        per_connection[placement.connection_id] += 1
        per_rung[Rung(placement.rung).label if placement.rung is not None else "named"] += 1
    oracle_paid = None if oracle is None else _oracle_paid(oracle)
    return RunMetrics(
        policy=run.policy,
        requests=len(placements),
        paid_usd=paid,
        list_usd=math.fsum(p.list_cost_usd for p in placements),
        served_list_usd=math.fsum(
            p.list_cost_usd for p in placements if p.connection_id is not None
        ),
        per_rung=dict(per_rung),
        refusals=dict(refusals),
        utilisation=_utilisation(run.window_use),
        lags=tuple(_lags(run)),
        flaps=_flaps(run),
        ratio_to_oracle=None if oracle_paid is None else ratio(paid, oracle_paid),
        per_connection=dict(per_connection),
    )


def _utilisation(uses: tuple[WindowUse, ...]) -> tuple[WindowUtilisation, ...]:
    grouped: dict[tuple[str, str], list[float]] = {}
    for use in uses:
        grouped.setdefault((use.connection_id, use.window), []).append(use.used / use.capacity)
    return tuple(
        WindowUtilisation(connection, window, len(shares), sum(shares) / len(shares), max(shares))
        for (connection, window), shares in sorted(grouped.items())
    )


def _times(run: PolicyRun) -> tuple[float, ...]:
    # Without arrival times, requests are taken as a second apart.
    return run.times or tuple(float(index) for index in range(len(run.placements)))


def _lags(run: PolicyRun) -> list[Lag]:
    times = _times(run)
    placements = run.placements
    ends: dict[str, list[float]] = {}
    for use in run.window_use:
        ends.setdefault(use.connection_id, []).append(use.end)
    for listed in ends.values():
        listed.sort()
    lags = []
    for use in run.window_use:
        reset, plan = use.end, use.connection_id
        first = bisect_left(times, reset)
        if first == 0 or first >= len(times) or placements[first - 1].connection_id == plan:
            continue
        later = ends[plan][bisect_right(ends[plan], reset) :]
        # Coming back only after the plan's next reset means another window kept it shut.
        deadline = later[0] if later else math.inf
        back = next(
            (i for i in range(first, len(placements)) if placements[i].connection_id == plan),
            None,
        )
        if back is None or times[back] >= deadline:
            if back is None and not later:
                back = len(placements) - 1
            else:
                continue
        lags.append(Lag(plan, use.window, reset, back - first, times[back] - times[first]))
    return sorted(lags, key=lambda lag: lag.reset_at)


def _flaps(run: PolicyRun) -> int:
    times = _times(run)
    resets: dict[str, list[float]] = {}
    for use in run.window_use:
        resets.setdefault(use.connection_id, []).append(use.end)
    for ends in resets.values():
        ends.sort()
    flaps = 0
    left_at: dict[str, float] = {}
    previous: str | None = None
    for index, placement in enumerate(run.placements):
        current = placement.connection_id
        if current is None:
            continue
        if previous in resets and current != previous:
            left_at[previous] = times[index]
        if current in resets and current != previous and current in left_at:
            ends = resets[current]
            # A reset after it was left (and at or before this return) explains the return.
            if bisect_right(ends, times[index]) == bisect_right(ends, left_at[current]):
                flaps += 1
            del left_at[current]
        previous = current
    return flaps
