"""`rungway explain` says which limit turned a request away, and how long one was held for
a plan's reset, from the ledger row as the admin API returns it."""

from __future__ import annotations

from typing import Any

from rungway.cli.explain import _limit_lines


def row(outcome: str, status: int, attempts: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"outcome": outcome, "status": status, "attempts": attempts or []}


def attempt(connection: str, detail: str) -> dict[str, Any]:
    return {"connection_id": connection, "detail": detail}


def test_a_held_request_says_how_long_it_waited() -> None:
    (line,) = _limit_lines(row("ok", 200), {"waited_s": 3.512})
    assert line.startswith("waited: held 3.5s for a plan's reset")


def test_a_budget_refusal_is_a_spent_budget() -> None:
    (line,) = _limit_lines(row("budget_exhausted", 429), {})
    assert line.startswith("limit: budget (a spent budget")


def test_each_attempts_limit_is_named_once_with_the_connection_that_hit_it() -> None:
    attempts = [
        attempt("plan", "window: the 5h window is spent"),
        attempt("api", "throttle: slow down"),
        attempt("api2", "throttle: slow down"),
        attempt("other", "upstream said 500"),
    ]
    lines = _limit_lines(row("upstream_rate_limited", 429, attempts), {})
    assert [line.split(" (")[0] for line in lines] == [
        "limit: window at plan",
        "limit: throttle at api",
    ]


def test_a_served_request_without_limits_says_nothing() -> None:
    assert _limit_lines(row("ok", 200), {}) == []
