"""From a trace's menus and plan windows to the oracle's LP, and back to one plan per request.

The bridge between the gateway's terms (requests, choices, windows) and the solver's arrays
(`oracle_lp.py`). A request becomes an option on a plan only when the plan could save
something: its fallback costs money, or it has none. A request whose fallback is free
stays off the plan, where it would only take quota from one that pays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from rungway.whatif.oracle_lp import FloatArray, Problem, Row, solve
from rungway.whatif.oracle_menu import Choice, Menu
from rungway.whatif.oracle_windows import instances
from rungway.whatif.plans import PlanWindow
from rungway.whatif.trace import Trace

_WHOLE = 1.0 - 1e-9
"""A share at least this is a whole request (the solver's answers carry rounding)."""
_SLACK = 1e-9
"""How far past its capacity a window may look from floating-point sums alone."""

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
                rows.append(Row(options[part][taken], weights[part][taken], window.window.capacity))
            found.append((instance.start, instance.end, instance.first, instance.stop))
        spans.append(found)
    problem = Problem(cost, must, np.array(request_of, dtype=np.int64), rows)
    solution = solve(problem)
    return Solved(
        _rounded(menus, problem, solution.shares, choices),
        spans,
        solution.paid_usd,
        solution.method,
    )


def _rounded(
    menus: Sequence[Menu], problem: Problem, shares: FloatArray, choices: Sequence[Choice]
) -> dict[int, Choice]:
    """Each request on the plan holding most of it, if it still fits there whole.

    Whole shares fit together (the LP kept them within capacity). A split request goes to
    the plan with its largest share when that is more than is left unserved and every
    window instance of that plan still has room for it whole; otherwise to its fallback.
    So the placements never overfill a window, and they pay at least `paid_usd`.
    """
    whole = _WHOLE
    best: dict[int, tuple[float, int]] = {}
    for option, (request, share) in enumerate(
        zip(problem.request.tolist(), shares.tolist(), strict=True)
    ):
        held = best.get(request)
        if held is None or share > held[0]:
            best[request] = (share, option)
    served = np.bincount(problem.request, weights=shares, minlength=len(menus))
    chosen = {option for share, option in best.values() if share >= whole}
    split = sorted(
        (
            (-share, option)
            for request, (share, option) in best.items()
            if whole > share > 1.0 - float(served[request])
        ),
    )
    if split:
        chosen |= _fitting([option for _, option in split], chosen, problem.rows)
    return {int(problem.request[option]): choices[option] for option in chosen}


def _fitting(candidates: list[int], chosen: set[int], rows: Sequence[Row]) -> set[int]:
    """The candidates, in order, that fit whole into every row beside `chosen`."""
    room: list[float] = []
    member: dict[int, list[tuple[int, float]]] = {}
    for index, row in enumerate(rows):
        used = 0.0
        for option, weight in zip(row.options.tolist(), row.weights.tolist(), strict=True):
            if option in chosen:
                used += weight
            member.setdefault(option, []).append((index, weight))
        room.append(row.capacity - used)
    fitted = set()
    for option in candidates:
        places = member.get(option, [])
        if all(weight <= room[index] + _SLACK * rows[index].capacity for index, weight in places):
            for index, weight in places:
                room[index] -= weight
            fitted.add(option)
    return fitted
