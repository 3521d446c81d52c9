"""From a trace's menus and plan windows to the oracle's LP, and back to one plan per request.

The bridge between the gateway's terms (requests, choices, windows) and the solver's arrays
(`oracle_lp.py`). A row's capacity in the LP is the window's capacity plus what its last
admitted request may overdraw (`_overdraw`), as a window admits requests until it is full.
A request becomes an option on a plan only when the plan could save something: its
fallback costs money, or it has none. A request whose fallback is free stays off the plan,
where it would only take quota from one that pays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

try:
    import numpy as np
except ImportError as missing:  # pragma: no cover - the base install has no solver
    raise ImportError(
        "the what-if oracle needs numpy and scipy, which the base install leaves out: "
        "pip install 'rungway[whatif]'"
    ) from missing

from rungway.whatif.oracle_lp import FloatArray, Problem, Row, solve
from rungway.whatif.oracle_menu import Choice, Menu
from rungway.whatif.oracle_windows import instances
from rungway.whatif.plans import PlanWindow
from rungway.whatif.trace import Trace

Span = tuple[float, float, int, int]
"""A window instance: start, end, and the slice of its window's counted requests."""


class Counted(Protocol):
    """One plan window with the requests it could count, in trace order, and their weights."""

    @property
    def connection_id(self) -> str: ...
    @property
    def window(self) -> PlanWindow: ...
    @property
    def requests(self) -> list[int]: ...
    @property
    def models(self) -> list[str]: ...
    @property
    def weights(self) -> list[float]: ...


@dataclass(frozen=True, slots=True)
class Solved:
    """Which plan each request went to (absent: none), each window's instances, the bound."""

    plan_of: dict[int, Choice]
    instances: list[list[Span]]
    paid_usd: float
    method: str


def solve_trace(trace: Trace, menus: Sequence[Menu], counted: Sequence[Counted]) -> Solved:
    """Solve the oracle's LP for `trace`, and round each request to where most of it went."""
    times = np.fromiter((request.at for request in trace), dtype=np.float64, count=len(trace))
    cost = np.zeros(len(menus), dtype=np.float64)
    must = np.zeros(len(menus), dtype=np.bool_)
    request_of: list[int] = []
    choices: list[Choice] = []
    option_at: dict[tuple[int, str, str], int] = {}
    for index, menu in enumerate(menus):
        if not menu.plans:
            continue
        if menu.fallback is None:
            must[index] = True
        else:
            cost[index] = menu.fallback.cost_usd
            if cost[index] <= 0:
                continue
        for choice in menu.plans:
            option_at[index, choice.connection_id, choice.model] = len(choices)
            request_of.append(index)
            choices.append(choice)
    rows: list[Row] = []
    limits: list[float] = []
    spans: list[list[Span]] = []
    for window in counted:
        held = np.array(window.requests, dtype=np.int64)
        weights = np.array(window.weights, dtype=np.float64)
        options = np.array(
            [
                option_at.get((request, window.connection_id, model), -1)
                for request, model in zip(window.requests, window.models, strict=True)
            ],
            dtype=np.int64,
        )
        found: list[Span] = []
        for instance in instances(window.window, times[held]):
            part = slice(instance.first, instance.stop)
            taken = options[part] >= 0
            if taken.any():
                capacity = window.window.capacity
                row = Row(options[part][taken], weights[part][taken], capacity)
                rows.append(replace(row, capacity=capacity + _overdraw(window.window, row)))
                limits.append(capacity)
            found.append((instance.start, instance.end, instance.first, instance.stop))
        spans.append(found)
    problem = Problem(cost, must, np.array(request_of, dtype=np.int64), rows)
    solution = solve(problem)
    return Solved(
        _rounded(menus, problem, solution.shares, choices, limits),
        spans,
        solution.paid_usd,
        solution.method,
    )


def _overdraw(window: PlanWindow, row: Row) -> float:
    """How far past its capacity a window instance's admitted requests may reach.

    A window admits a request while it is not yet full, and the request's whole use counts:
    the last one admitted may take it past its capacity. Every admitted set therefore
    weighs less than the capacity plus its heaviest request; in requests, whole counts
    below the capacity plus one, at most the capacity rounded up."""
    if window.unit == "requests":
        return math.ceil(window.capacity) - window.capacity
    return float(row.weights.max())


def _rounded(
    menus: Sequence[Menu],
    problem: Problem,
    shares: FloatArray,
    choices: Sequence[Choice],
    limits: Sequence[float],
) -> dict[int, Choice]:
    """Each request on the plan holding most of it, if that plan's windows admit it then.

    A request goes to the plan with its largest share when that is more than is left
    unserved; in trace order, each is admitted as a real window admits it (every window
    instance counting it not yet at its capacity), else it goes to its fallback. So the
    placements are ones a policy could make, and they pay at least `paid_usd`.
    """
    best: dict[int, tuple[float, int]] = {}
    for option, (request, share) in enumerate(
        zip(problem.request.tolist(), shares.tolist(), strict=True)
    ):
        held = best.get(request)
        if held is None or share > held[0]:
            best[request] = (share, option)
    served = np.bincount(problem.request, weights=shares, minlength=len(menus))
    wanted = sorted(
        option
        for request, (share, option) in best.items()
        if share > 0 and share > 1.0 - float(served[request])
    )
    member: dict[int, list[tuple[int, float]]] = {}
    for index, row in enumerate(problem.rows):
        for option, weight in zip(row.options.tolist(), row.weights.tolist(), strict=True):
            member.setdefault(option, []).append((index, weight))
    used = [0.0] * len(problem.rows)
    plan_of = {}
    for option in wanted:
        places = member.get(option, [])
        if all(used[index] < limits[index] for index, _ in places):
            for index, weight in places:
                used[index] += weight
            plan_of[int(problem.request[option])] = choices[option]
    return plan_of
