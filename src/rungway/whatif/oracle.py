"""The oracle: the least paid spend any placement of the trace could reach, knowing it all.

It sees every request of the trace at once, and puts requests on plan quota where the
quota saves the most. Its figure is what the other policies are measured against.

What it may do with each request (`oracle_menu.py`): exactly what the served ladder could
do, the same candidates `plan_route` gives, and no more. A request no plan takes pays its
cheapest fallback among them (0 when a keyless, free or unlimited connection serves its
model); one with no fallback at all (`auto/subscription`, a plan-only model) is refused.

How it decides (`oracle_lp.py`): a linear program. x[i, p] in [0, 1] is the share of
request i that plan p serves (only plans that serve its model, and only requests whose
fallback costs something or that have none). Per window instance of each plan, the
requests' weights in the window's unit (tokens, requests, or list-price dollars at the
plan) times their shares stay within its capacity plus its heaviest request: a window
admits requests while it is not yet full and counts the last one whole, so it may end past
its capacity (in requests: the capacity rounded up). A request's shares add up to at most
1. The paid spend, the sum of cost[i] * (1 - sum over p of x[i, p]), is minimised, after
serving as many plan-only requests as the plans hold. Where every request has one plan and
every plan one window, the LP falls apart into one fractional knapsack per window instance,
solved exactly by a greedy (the dearest request per unit of quota first); elsewhere HiGHS
solves it.

Why it is a lower bound: shares may be fractional, and no real request is split, so the
integer optimum (and every policy with the same windows) pays at least the LP's optimum.
That figure is `PolicyRun.bound_usd`. The capacity plus the heaviest request is looser
than a window's real rule (by up to one request per window instance: nothing on a month of
requests, visible on a handful). The placements round the shares: each request goes
where most of it went, a plan in trace order as long as its windows admit it as a real
window does, else its fallback. So they are placements a policy could make, and their
own spend is at or above the bound.

Which windows (`oracle_windows.py`): `fixed` and `midnight` windows are where the provider
puts them. A `first_use` window starts at the first request after the previous one ended;
the oracle lays them over the requests its plan could serve, as the ladder does by coming
back at once after each reset, so it is a bound against every policy with those windows
and the optimum of that alignment against one that shifts them.

Importing this module without numpy and scipy (the `whatif` extra) raises ImportError
saying how to install them; `cli` imports it only when the oracle is asked for.

What it leaves out: the ladder's exit cut-off (the oracle fills each window to its
capacity), how much of an open budget is left (a budget of 0 still closes its rung),
client keys' budgets, and cooldowns: perfect knowledge needs none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rungway.whatif.oracle_menu import Choice, Menu, menus
from rungway.whatif.oracle_solve import solve_trace
from rungway.whatif.outcome import Placement, PolicyRun, WindowUse, World
from rungway.whatif.plans import PlanWindow
from rungway.whatif.trace import Trace, TraceRequest

__all__ = ["Oracle"]

_PLAN_FULL = "plan_quota: every plan serving it is full, and no other connection serves it"


@dataclass(frozen=True, slots=True)
class _Counted:
    """One window of one plan, and the requests it could count, in trace order, each with
    the model the plan would serve it by and its weight in the window's unit."""

    connection_id: str
    window: PlanWindow
    requests: list[int]
    models: list[str]
    weights: list[float]


class Oracle:
    """The offline optimum with perfect knowledge of the trace, as a `Policy`."""

    name = "oracle"

    def run(self, trace: Trace, world: World, progress: Callable[[int], None]) -> PolicyRun:
        """Place every request where the least money is paid; `bound_usd` is the LP's optimum."""
        found = menus(trace, world, progress)
        counted = _counted(trace, found, world)
        solved = solve_trace(trace, found, counted)
        placements = tuple(
            _placement(index, menu, solved.plan_of.get(index)) for index, menu in enumerate(found)
        )
        use = tuple(
            WindowUse(c.connection_id, c.window.name, start, end, used, c.window.capacity)
            for c, start, end, used in _window_use(counted, solved.instances, solved.plan_of)
        )
        return PolicyRun(
            self.name,
            placements,
            use,
            times=tuple(request.at for request in trace),
            bound_usd=solved.paid_usd,
        )


def _counted(trace: Trace, found: Sequence[Menu], world: World) -> list[_Counted]:
    """Every plan window with the requests it could count and their weights in its unit.

    A request the plan could serve by several models (only with per-model windows, see
    `oracle_menu`) appears once per model the window counts."""
    counted = []
    for connection_id, quota in world.plans.items():
        for window in quota.windows:
            entry = _Counted(connection_id, window, [], [], [])
            for index, menu in enumerate(found):
                for choice in menu.plans:
                    if choice.connection_id == connection_id and (
                        window.model is None or choice.model == window.model
                    ):
                        entry.requests.append(index)
                        entry.models.append(choice.model)
                        entry.weights.append(_weight(window, trace[index], choice))
            counted.append(entry)
    return counted


def _weight(window: PlanWindow, request: TraceRequest, choice: Choice) -> float:
    if window.unit == "requests":
        return 1.0
    if window.unit == "tokens":
        return float(request.tokens)
    return choice.list_cost_usd


def _placement(index: int, menu: Menu, plan: Choice | None) -> Placement:
    if plan is not None:
        return Placement(index, plan.connection_id, int(plan.rung), 0.0, plan.list_cost_usd)
    fallback = menu.fallback
    if fallback is not None:
        return Placement(
            index,
            fallback.connection_id,
            int(fallback.rung),
            fallback.cost_usd,
            fallback.list_cost_usd,
        )
    if menu.refusal is not None:
        return Placement(index, None, None, 0.0, 0.0, refusal=menu.refusal)
    list_cost = menu.plans[0].list_cost_usd if menu.plans else 0.0
    return Placement(index, None, None, 0.0, list_cost, refusal=_PLAN_FULL)


def _window_use(
    counted: Sequence[_Counted],
    instances: Sequence[Sequence[tuple[float, float, int, int]]],
    plan_of: Mapping[int, Choice],
) -> list[tuple[_Counted, float, float, float]]:
    """Per window instance, what the rounded placements put in it."""
    rows = []
    for window, spans in zip(counted, instances, strict=True):
        on_plan = [
            (request in plan_of)
            and plan_of[request].connection_id == window.connection_id
            and plan_of[request].model == model
            for request, model in zip(window.requests, window.models, strict=True)
        ]
        for start, end, first, stop in spans:
            used = sum(
                weight
                for weight, held in zip(
                    window.weights[first:stop], on_plan[first:stop], strict=True
                )
                if held
            )
            rows.append((window, start, end, used))
    return rows
