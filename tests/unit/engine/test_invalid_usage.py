"""Settling an answer whose usage was not token counts: always its ceiling, never less.

With a hold, the hold settles whole; on a paid rung without a budget, the ceiling of the
body that went upstream is spent; on a plan rung it adds nothing to the bill. No figure
that reaches a budget is negative or non-finite, whatever the usage said.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from rungway.budget import HeldFor, Reservation
from rungway.engine.spending import Spending
from rungway.protocol.usage import ReportedUsage
from rungway.routing.rungs import Rung
from rungway.routing.snapshot import RungSpend
from tests.unit.engine.world import HeldBudget, chat_call, openai_route


class _Unbudgeted:
    """A budget with no account: nothing is held, costs are counted as spent."""

    def __init__(self) -> None:
        self.spent: list[float] = []

    def settle(self, reservation: Reservation, cost: float, now: float) -> None:
        raise AssertionError("nothing is held")

    def release(self, reservation: Reservation) -> None:
        raise AssertionError("nothing is held")

    async def reserve(
        self,
        rung: Rung,
        client_key: str | None,
        amount: float,
        now: float,
        *,
        held_for: HeldFor | None = None,
    ) -> Reservation | None:
        return None

    def spend(
        self,
        rung: Rung,
        client_key: str | None,
        cost: float,
        now: float,
        *,
        request_id: str | None = None,
    ) -> None:
        self.spent.append(cost)

    def rung_spend(self, now: float) -> Mapping[Rung, RungSpend]:
        return {}


INVALID = ReportedUsage(input_tokens=5, invalid="completion_tokens: -1000000")


def test_a_held_answer_with_invalid_usage_settles_its_whole_hold() -> None:
    budget = HeldBudget()
    spending = Spending(budget)
    call, route = chat_call(), openai_route("a")
    held = asyncio.run(spending.hold(call, route, call.body, len(call.raw_body), 0.0))
    assert isinstance(held, Reservation)
    costs = spending.settle(call, route, INVALID, held, 0.0)
    assert budget.settled == [(held, held.amount)]
    assert costs.incremental == held.amount > 0
    assert costs.list_price is None


def test_an_unheld_paid_answer_with_invalid_usage_spends_the_ceiling_of_what_was_sent() -> None:
    budget = _Unbudgeted()
    spending = Spending(budget)
    call, route = chat_call(), openai_route("a")
    sent = (call.body, len(call.raw_body))
    costs = spending.settle(call, route, INVALID, None, 0.0, sent=sent)
    assert budget.spent == [spending.ceiling(route, *sent)]
    assert costs.incremental == spending.ceiling(route, *sent) > 0


def test_a_plan_answer_with_invalid_usage_adds_nothing_to_the_bill() -> None:
    budget = _Unbudgeted()
    spending = Spending(budget)
    call = chat_call()
    route = replace(openai_route("a"), rung=Rung.SUBSCRIPTION)
    costs = spending.settle(call, route, INVALID, None, 0.0, sent=(call.body, 10))
    assert (costs.incremental, costs.list_price, budget.spent) == (0.0, None, [])


@given(
    counts=st.lists(st.integers(-(2**70), 2**70), min_size=5, max_size=5),
    cost=st.one_of(st.none(), st.floats(allow_nan=True)),
)
def test_no_usage_settles_a_hold_below_zero_or_past_any_real_cost(
    counts: list[int], cost: float | None
) -> None:
    budget = HeldBudget()
    spending = Spending(budget)
    call, route = chat_call(), openai_route("a")
    held = asyncio.run(spending.hold(call, route, call.body, len(call.raw_body), 0.0))
    assert isinstance(held, Reservation)
    # Built here, past the readers' checks: the settle's own guard is what is tested.
    inputs, output, reads, writes, reasoning = counts
    usage = ReportedUsage(inputs, output, reads, writes, reasoning, cost_usd=cost)
    spending.settle(call, route, usage, held, 0.0)
    [(_, settled)] = budget.settled
    assert math.isfinite(settled)
    assert 0.0 <= settled <= 1e12
