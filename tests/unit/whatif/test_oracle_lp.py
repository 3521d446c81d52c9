"""The oracle's solvers: the greedy fast path equals the LP, and both bound every whole fill."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rungway.whatif.oracle_lp import (
    Problem,
    Row,
    greedy_applies,
    paid_usd,
    solve,
    solve_greedy,
    solve_lp,
)

# Weights and costs on a coarse grid keep float sums exact enough to compare solvers.
weights = st.integers(min_value=0, max_value=8).map(float)
costs = st.integers(min_value=0, max_value=20).map(lambda cents: cents / 4)


def problem(
    cost: list[float],
    must: list[bool],
    request: list[int],
    rows: list[tuple[list[int], list[float], float]],
) -> Problem:
    return Problem(
        np.array(cost, dtype=np.float64),
        np.array(must, dtype=np.bool_),
        np.array(request, dtype=np.int64),
        [Row(np.array(o, dtype=np.int64), np.array(w, dtype=np.float64), c) for o, w, c in rows],
    )


@st.composite
def knapsacks(draw: st.DrawFn) -> Problem:
    """Requests with at most one plan option each, every option in at most one window."""
    count = draw(st.integers(min_value=0, max_value=12))
    cost = [draw(costs) for _ in range(count)]
    must = [draw(st.booleans()) and draw(st.booleans()) for _ in range(count)]
    request = [r for r in range(count) if draw(st.booleans()) or must[r]]
    options = list(range(len(request)))
    rows = []
    while options:
        size = draw(st.integers(min_value=1, max_value=len(options)))
        taken, options = options[:size], options[size:]
        if draw(st.booleans()):
            capacity = float(draw(st.integers(min_value=1, max_value=12)))
            rows.append((taken, [draw(weights) for _ in taken], capacity))
    return problem(cost, must, request, rows)


@st.composite
def small_problems(draw: st.DrawFn) -> Problem:
    """Up to four requests on up to two plans, each plan with up to two overlapping rows."""
    count = draw(st.integers(min_value=1, max_value=4))
    cost = [draw(costs) for _ in range(count)]
    must = [draw(st.booleans()) and draw(st.booleans()) for _ in range(count)]
    pairs = [(r, p) for r in range(count) for p in range(2) if draw(st.booleans())]
    request = [r for r, _ in pairs]
    rows = []
    for plan in range(2):
        mine = [o for o, (_, p) in enumerate(pairs) if p == plan]
        for _ in range(draw(st.integers(min_value=0, max_value=2))):
            held = [o for o in mine if draw(st.booleans())]
            capacity = float(draw(st.integers(min_value=1, max_value=10)))
            rows.append((held, [draw(weights) for _ in held], capacity))
    return problem(cost, must, request, rows)


def whole_optimum(p: Problem) -> tuple[float, float]:
    """By brute force over whole assignments: most plan-only requests served, then least paid."""
    best: tuple[float, float] | None = None
    for chosen in itertools.product((0.0, 1.0), repeat=p.options):
        shares = np.array(chosen, dtype=np.float64)
        if np.bincount(p.request, weights=shares, minlength=len(p.cost)).max(initial=0) > 1:
            continue
        if any(float(row.weights @ shares[row.options]) > row.capacity for row in p.rows):
            continue
        served = float(shares @ p.must[p.request]) if p.options else 0.0
        key = (-served, paid_usd(p, shares))
        if best is None or key < best:
            best = key
    assert best is not None
    return best


def must_served(p: Problem, shares: np.ndarray) -> float:
    return float(shares @ p.must[p.request]) if p.options else 0.0


@settings(max_examples=150, deadline=None)
@given(knapsacks())
@example(  # stage 2 trades 4e-7 of a plan-only share (weight 8) for a $3 request's (weight 1)
    problem(
        [0, 0, 0, 0, 3, 0, 0, 0, 0],
        [False, False, True, True, False, True, True, True, False],
        [1, 2, 3, 4, 5, 6, 7, 8],
        [([0, 1, 2, 3, 4], [0, 0, 8, 1, 0], 2.0)],
    )
)
def test_the_greedy_equals_the_lp_where_it_applies(p: Problem) -> None:
    assert greedy_applies(p)
    greedy, lp = solve_greedy(p), solve_lp(p)
    # Equal within what stage 2 may give up of stage 1's share (`_KEEP_SLACK`, 1e-7 of it)
    # and the solver's feasibility tolerance (1e-7 of a window, per row). On this grid the
    # first is the larger: up to 12 requests' share times 1e-7, freeing up to 8 times as
    # much weight for a priced request of weight 1 and cost $5, at most $4.8e-5 in all.
    assert greedy.paid_usd == pytest.approx(lp.paid_usd, abs=1e-4)
    assert must_served(p, greedy.shares) == pytest.approx(must_served(p, lp.shares), abs=1e-5)
    assert solve(p).method == "greedy"


@settings(max_examples=150, deadline=None)
@given(small_problems())
def test_the_lp_is_a_lower_bound_on_every_whole_fill(p: Problem) -> None:
    # Whatever the best whole assignment pays (serving as many plan-only requests), the
    # LP pays no more and serves no fewer, and its shares keep every window.
    served, paid = whole_optimum(p)
    solution = solve(p)
    assert must_served(p, solution.shares) >= -served - 1e-6
    if must_served(p, solution.shares) <= -served + 1e-6:
        assert solution.paid_usd <= paid + 1e-6
    for row in p.rows:
        assert float(row.weights @ solution.shares[row.options]) <= row.capacity + 1e-6
    per_request = np.bincount(p.request, weights=solution.shares, minlength=len(p.cost))
    assert per_request.max(initial=0) <= 1 + 1e-6


def test_three_requests_in_one_window_by_hand() -> None:
    # Costs $1, $3, $2, each of weight 1, capacity 1: the greedy and the LP both take the
    # $3 request, leaving $3 paid.
    p = problem([1, 3, 2], [False] * 3, [0, 1, 2], [([0, 1, 2], [1, 1, 1], 1.0)])
    assert greedy_applies(p)
    for solution in (solve_greedy(p), solve_lp(p)):
        assert solution.paid_usd == pytest.approx(3.0)
        assert solution.shares.tolist() == pytest.approx([0.0, 1.0, 0.0])


def test_a_request_on_two_plans_is_split_at_most_once() -> None:
    # One request of $4 and weight 2 on plans a and b, each with a capacity of 1: half
    # on each, nothing paid. Not a greedy case (the request has two options).
    p = problem([4], [False], [0, 0], [([0], [2], 1.0), ([1], [2], 1.0)])
    assert not greedy_applies(p)
    solution = solve(p)
    assert solution.method == "lp"
    assert solution.paid_usd == pytest.approx(0.0)
    assert solution.shares.tolist() == pytest.approx([0.5, 0.5])
