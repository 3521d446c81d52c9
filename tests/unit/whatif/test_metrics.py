"""A run's figures from its placements alone: spend, rungs, re-entry lag, flaps, ratio."""

from __future__ import annotations

import dataclasses
import math

from rungway.whatif.metrics import measure, ratio
from rungway.whatif.outcome import Placement, PolicyRun, WindowUse


def _run(ids: str, resets: list[float], name: str = "p") -> PolicyRun:
    """One request a second: `p` the plan (free), `c` the cheap key ($1), `-` refused."""
    placements = []
    for index, code in enumerate(ids):
        if code == "p":
            placements.append(Placement(index, "plan", 0, 0.0, 1.0))
        elif code == "c":
            placements.append(Placement(index, "cheap", 3, 1.0, 1.0))
        else:
            placements.append(Placement(index, None, None, 0.0, 1.0, refusal="budget_exhausted"))
    uses = tuple(
        WindowUse("plan", "5h", start, end, 3, 4)
        for start, end in zip([0.0, *resets], resets, strict=False)
    )
    return PolicyRun(name, tuple(placements), uses, times=tuple(float(i) for i in range(len(ids))))


def test_spend_rungs_and_refusals() -> None:
    figures = measure(_run("ppcc-c", [10.0]))
    assert figures.paid_usd == 3.0
    assert figures.list_usd == 6.0
    assert figures.served_list_usd == 5.0
    assert figures.per_rung == {"subscription": 2, "cheap": 3}
    assert figures.budget_refusals == 1
    assert figures.utilisation[0].mean == 0.75


def test_coming_back_with_the_first_request_after_the_reset_is_no_lag() -> None:
    figures = measure(_run("pppccppp", [5.0]))
    assert [(lag.requests, lag.seconds) for lag in figures.lags] == [(0, 0.0)]
    assert figures.flaps == 0


def test_coming_back_late_is_lag_in_requests_and_seconds() -> None:
    figures = measure(_run("pppcccccpp", [5.0]))
    assert [(lag.requests, lag.seconds) for lag in figures.lags] == [(3, 3.0)]


def test_a_reset_found_on_the_plan_or_with_no_request_after_it_is_not_counted() -> None:
    assert measure(_run("pppppp", [3.0])).lags == ()
    assert measure(_run("pppccc", [9.0])).lags == ()


def test_returning_without_a_reset_between_is_a_flap() -> None:
    assert measure(_run("ppcpcp", [20.0])).flaps == 2
    assert measure(_run("ppccpp", [3.0])).flaps == 0


def test_the_ratio_to_the_oracle() -> None:
    oracle = _run("pppc", [10.0], name="oracle")
    figures = measure(_run("ppcc", [10.0]), oracle)
    assert figures.ratio_to_oracle == 2.0
    assert ratio(0.0, 0.0) == 1.0
    assert math.isinf(ratio(1.0, 0.0))
    assert figures.to_json()["ratio_to_oracle"] == 2.0
    assert measure(_run("c", [5.0]), _run("p", [5.0])).to_json()["ratio_to_oracle"] is None


def test_the_ratio_divides_by_the_oracles_proven_bound() -> None:
    # Its placements paid $1; its linear program proved $0.50 the least any placement pays.
    oracle = dataclasses.replace(_run("pppc", [10.0], name="oracle"), bound_usd=0.5)
    assert measure(_run("ppcc", [10.0]), oracle).ratio_to_oracle == 4.0
    assert measure(oracle, oracle).ratio_to_oracle == 2.0
