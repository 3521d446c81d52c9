"""The oracle's linear program over plan capacity, and its greedy fast path.

The problem is given as arrays, with nothing of the gateway in it, so it can be tested
against hand-solved cases and the two solvers against each other:

- an *option* is one way to put one request on one plan; `request[o]` is its request;
- a *row* is one window instance of one plan: the options it holds, each with its weight
  in the window's unit, and the most they may weigh together (`oracle_solve` gives the
  window's capacity plus what its last admitted request may overdraw);
- `cost[r]` is what request r pays when no plan takes it (its cheapest paid alternative),
  and `must[r]` marks a request with no paid alternative at all (a plan-only model or
  `auto/subscription`), which is refused when no plan takes it.

The LP, with x[o] in [0, 1] the share of request[o] served by plan[o]:

    for every row k:      sum over o in k of weight[k, o] * x[o] <= capacity[k]
    for every request r:  sum over o of r of x[o] <= 1
    stage 1 (only when some request is plan-only):
        maximise M = sum of x[o] over options of plan-only requests
    stage 2:
        minimise sum over priced requests r of cost[r] * (1 - sum over o of r of x[o]),
        subject also to stage 1's share M being kept.

Stage 1 makes the oracle serve every plan-only request the plans can hold before it saves
a cent, as a user expects of the best use of a plan: it never refuses a request to keep
quota for one that would otherwise pay.

The optimum of the relaxation is a lower bound on the paid spend of every integer
assignment that keeps the same windows (a request is not split across connections in
reality), and it is what `solve` returns as `paid_usd`.

The fast path: when every request has at most one option and every option sits in at most
one row (one plan with one family of non-overlapping windows, or plans that share no
request and have one window each), the rows are independent fractional knapsacks, and
the greedy that fills each by plan-only requests first (lightest first), then by cost per
unit of weight (dearest first) is optimal for both stages. `solve` takes it when it
applies; `solve_lp` is the general path and the tests hold the two equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

try:
    import numpy as np
    import numpy.typing as npt
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import csr_matrix, vstack
except ImportError as missing:  # pragma: no cover - the base install has no solver
    raise ImportError(
        "the what-if oracle solves a linear program with scipy, which the base install "
        "leaves out: pip install 'rungway[whatif]'"
    ) from missing

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_KEEP_SLACK = 1e-7
"""How much of stage 1's served share stage 2 may give up, relative, for the solver's
tolerances; far below a single request's share."""


@dataclass(frozen=True, slots=True)
class Row:
    """One window instance: its options, their weights in its unit, and its capacity."""

    options: IntArray
    weights: FloatArray
    capacity: float


@dataclass(frozen=True, slots=True)
class Problem:
    """Requests, their options on plans, and the window instances that bound the plans."""

    cost: FloatArray
    must: BoolArray
    request: IntArray
    rows: Sequence[Row]

    @property
    def options(self) -> int:
        """How many options (request, plan) the problem has."""
        return len(self.request)


@dataclass(frozen=True, slots=True)
class Solution:
    """The share of each option, the paid spend left, and which solver found it."""

    shares: FloatArray
    paid_usd: float
    method: str


class SolverFailed(RuntimeError):
    """The LP solver stopped without an optimum (it should not on a feasible bounded LP)."""


def solve(problem: Problem) -> Solution:
    """The fractional optimum, by the greedy when it is exact, else by the LP."""
    if greedy_applies(problem):
        return solve_greedy(problem)
    return solve_lp(problem)


def greedy_applies(problem: Problem) -> bool:
    """Whether every request has at most one option and every option at most one row."""
    if problem.options == 0:
        return True
    if np.bincount(problem.request).max() > 1:
        return False
    seen = np.zeros(problem.options, dtype=np.int64)
    for row in problem.rows:
        np.add.at(seen, row.options[row.weights > 0], 1)
    return bool(seen.max() <= 1)


def solve_greedy(problem: Problem) -> Solution:
    """Fill each row independently: plan-only requests lightest first, then dearest per unit.

    Only valid where `greedy_applies`; options in no row (or of weight 0 in their row) are
    served whole.
    """
    shares = np.ones(problem.options, dtype=np.float64)
    cost = problem.cost[problem.request]
    must = problem.must[problem.request]
    for row in problem.rows:
        weighted = row.weights > 0
        options, weights = row.options[weighted], row.weights[weighted]
        if len(options) == 0:
            continue
        # Sort keys, last one primary: plan-only first, then lightest (for them) or
        # dearest per unit (for the rest); ties by option for a stable answer.
        per_unit = np.where(must[options], 1.0 / weights, cost[options] / weights)
        order = np.lexsort((options, -per_unit, ~must[options]))
        room = row.capacity
        taken = np.zeros(len(options), dtype=np.float64)
        cumulative = np.cumsum(weights[order])
        whole = cumulative <= room
        taken[order[whole]] = 1.0
        first_partial = int(np.count_nonzero(whole))
        if first_partial < len(order):
            before = cumulative[first_partial - 1] if first_partial else 0.0
            index = order[first_partial]
            taken[index] = max(0.0, min(1.0, (room - before) / weights[index]))
        shares[options] = taken
    return Solution(shares, paid_usd(problem, shares), "greedy")


def solve_lp(problem: Problem) -> Solution:
    """The two-stage LP above, solved by HiGHS over a sparse constraint matrix."""
    n = problem.options
    if n == 0:
        return Solution(np.zeros(0), paid_usd(problem, np.zeros(0)), "lp")
    upper = np.ones(n, dtype=np.float64)
    matrix, bounds = _constraints(problem, upper)
    must = problem.must[problem.request]
    cost = problem.cost[problem.request]
    objective = np.where(must, 0.0, -cost)
    keep: tuple[FloatArray, float] | None = None
    if must.any():
        first = _linprog(-must.astype(np.float64), matrix, bounds, upper)
        if not objective.any():
            return Solution(first, paid_usd(problem, first), "lp")  # nothing left to save
        served = float(must @ first)
        keep = (-must.astype(np.float64), -served * (1.0 - _KEEP_SLACK))
    if keep is not None:
        matrix = _stack(matrix, keep[0])
        bounds = np.append(bounds, keep[1])
    shares = _linprog(objective, matrix, bounds, upper)
    return Solution(shares, paid_usd(problem, shares), "lp")


def paid_usd(problem: Problem, shares: FloatArray) -> float:
    """What the priced requests pay for the share of them no plan serves."""
    served = np.bincount(problem.request, weights=shares, minlength=len(problem.cost))
    unserved = np.clip(1.0 - served, 0.0, 1.0)
    return float(np.where(problem.must, 0.0, problem.cost) @ unserved)


def _constraints(problem: Problem, upper: FloatArray) -> tuple[csr_matrix, FloatArray]:
    rows: list[IntArray] = []
    columns: list[IntArray] = []
    values: list[FloatArray] = []
    bounds: list[float] = []
    for row in problem.rows:
        weighted = row.weights > 0
        options, weights = row.options[weighted], row.weights[weighted]
        if len(options) == 0 or weights.sum() <= row.capacity:
            continue  # a row its options cannot fill binds nothing
        if row.capacity <= 0:
            upper[options] = 0.0
            continue
        # Scaled to capacity 1, so rows in tokens and rows in dollars weigh alike.
        rows.append(np.full(len(options), len(bounds), dtype=np.int64))
        columns.append(options)
        values.append(weights / row.capacity)
        bounds.append(1.0)
    counts = np.bincount(problem.request)
    shared = np.flatnonzero(counts > 1)
    if len(shared):
        # One row per request with several options: its shares add up to at most 1.
        position = np.full(len(counts), -1, dtype=np.int64)
        position[shared] = np.arange(len(shared)) + len(bounds)
        held = position[problem.request] >= 0
        rows.append(position[problem.request][held])
        columns.append(np.flatnonzero(held).astype(np.int64))
        values.append(np.ones(int(held.sum())))
        bounds.extend([1.0] * len(shared))
    shape = (len(bounds), problem.options)
    if not bounds:
        return csr_matrix(shape, dtype=np.float64), np.zeros(0)
    matrix = csr_matrix(
        (np.concatenate(values), (np.concatenate(rows), np.concatenate(columns))), shape=shape
    )
    return matrix, np.array(bounds, dtype=np.float64)


def _stack(matrix: csr_matrix, extra: FloatArray) -> csr_matrix:
    return csr_matrix(vstack([matrix, csr_matrix(extra.reshape(1, -1))]))


def _linprog(
    objective: FloatArray, matrix: csr_matrix, bounds: FloatArray, upper: FloatArray
) -> FloatArray:
    if matrix.shape[0] == 0:
        # Nothing binds: take every option that lowers the objective.
        return np.where(objective < 0, upper, 0.0)
    # No variable is integral, so HiGHS solves the LP itself; `milp` is its entry point
    # that takes a sparse constraint matrix as it is. Presolve is off: with some hundred
    # thousand columns and a few dozen rows that bind, it took some 3 s of a 3.2 s solve
    # of a month's trace, and the simplex alone needs 0.2 s.
    result = milp(
        objective,
        constraints=LinearConstraint(matrix, -np.inf, bounds),
        bounds=Bounds(np.zeros(len(upper)), upper),
        options={"presolve": False},
    )
    if result.x is None:
        raise SolverFailed(f"the oracle's LP stopped without an optimum: {result.message}")
    shares: FloatArray = np.clip(result.x, 0.0, upper)
    return shares
