"""What each attempt may cost and did cost: budget holds before it, costs after it.

An attempt on a paid rung (cheap or premium) first holds its cost ceiling against the
rung's budget and the client key's, priced from the body it is about to send; one that
does not fit is not sent. When the request is recorded, its tokens are priced: the
incremental cost is what it added to the bill (nothing on the subscription, keyless and
free rungs; the upstream's own figure where it reports one), and the list cost is what the
same tokens cost metered. The hold is then settled to
the incremental cost, or released if the attempt failed. An attempt whose outcome the
gateway cannot know (it broke or was cancelled after its request went out) settles at its
whole hold, as the upstream may have billed up to that. So does one whose upstream
answered with usage that is not a token count (`ReportedUsage.invalid`): it was served and
billed for an amount nobody can read, so it costs its ceiling, never less and never a
credit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final

from rungway.budget import BudgetUnavailable, HeldFor, Reservation, Shortfall, cost_ceiling
from rungway.budget.ceiling import output_that_fits, requested_output_limit
from rungway.engine.call import Call, Refusal
from rungway.engine.planning import Route
from rungway.engine.state import Budget
from rungway.pricing import PriceBook, TokenCounts
from rungway.protocol.usage import ReportedUsage
from rungway.routing.rungs import Rung

PAID_RUNGS: Final = frozenset({Rung.CHEAP, Rung.PREMIUM})


@dataclass(frozen=True, slots=True)
class Costs:
    """One request's incremental and list-price cost, in US dollars."""

    incremental: float
    list_price: float | None


NO_COST: Final = Costs(0.0, None)
_MOST_USD: Final = 1e12
"""More than any request can cost: a figure past it comes from numbers that are not counts."""
_LIST_PRICES: Final = PriceBook()


class Spending:
    """Holds, prices and settles each attempt against the rung budgets."""

    def __init__(self, budget: Budget, prices: PriceBook | None = None) -> None:
        self._budget = budget
        self._prices = prices or PriceBook()

    def ceiling(self, route: Route, sent: Mapping[str, Any], sent_bytes: int) -> float:
        """The most an attempt on `route` sending `sent` (`sent_bytes` long) could cost."""
        return cost_ceiling(
            route.connection.provider,
            route.target.model,
            sent,
            sent_bytes,
            prices=self._prices,
            model_limit=route.max_output,
        )

    async def hold(
        self, call: Call, route: Route, sent: Mapping[str, Any], sent_bytes: int, now: float
    ) -> Reservation | Shortfall | BudgetUnavailable | None:
        """A hold for an attempt on a paid rung, priced from `sent`, the body going upstream
        (`sent_bytes` long); None when no budget needs one."""
        if route.rung not in PAID_RUNGS:
            return None
        assert route.rung is not None
        connection = route.connection
        ceiling = self.ceiling(route, sent, sent_bytes)
        held_for = HeldFor(
            call.request_id,
            call.started_at,
            call.api.value,
            str(call.body.get("model")),
            connection.id,
            connection.provider,
            route.target.model,
        )
        held = await self._budget.reserve(
            route.rung, call.client_key, ceiling, now, held_for=held_for
        )
        if isinstance(held, Shortfall):
            return self._what_fits(held, call, route, sent_bytes, now)
        return held

    def _what_fits(
        self, shortfall: Shortfall, call: Call, route: Route, sent_bytes: int, now: float
    ) -> Shortfall:
        """`shortfall` with what is left of a rung's budget and the output that would fit
        it, so the refusal can say what to ask for."""
        sets_limit = requested_output_limit(call.body) is not None
        if shortfall.account != "rung" or route.rung is None:
            return replace(shortfall, sets_output_limit=sets_limit)
        spend = self._budget.rung_spend(now).get(route.rung)
        used = spend.spent_usd + spend.reserved_usd if spend is not None else 0.0
        available = max(0.0, shortfall.budget_usd - used)
        fits = output_that_fits(
            route.connection.provider,
            route.target.model,
            sent_bytes,
            available,
            prices=self._prices,
        )
        return replace(
            shortfall, fits_output=fits, available_usd=available, sets_output_limit=sets_limit
        )

    def release(self, reservation: Reservation | None) -> None:
        """The attempt failed: it cost nothing."""
        if reservation is not None:
            self._budget.release(reservation)

    def settle_unknown(self, reservation: Reservation | None, now: float) -> Costs:
        """The attempt went upstream and its outcome is unknown: it costs its whole hold."""
        if reservation is None:
            return NO_COST
        self._budget.settle(reservation, reservation.amount, now)
        return Costs(reservation.amount, None)

    def settle(
        self,
        call: Call,
        route: Route,
        usage: ReportedUsage,
        reservation: Reservation | None,
        now: float,
        *,
        overage: bool = False,
        sent: tuple[Mapping[str, Any], int] | None = None,
    ) -> Costs:
        """Price the request's tokens and settle its hold to the incremental cost.

        `overage`: the upstream served the request past the plan's quota and billed it.
        `sent`: the body that went upstream and its length, which price the ceiling of a
        billed request without a hold whose usage is invalid."""
        costs = price(route, usage, overage=overage, prices=self._prices)
        # Counts are checked where they are read; this keeps any other way to a negative or
        # non-finite figure from crediting a budget (the comparison is false for NaN).
        if usage.invalid is not None or not 0.0 <= costs.incremental <= _MOST_USD:
            billed = route.rung in PAID_RUNGS or overage
            if reservation is not None:
                costs = Costs(reservation.amount, None)
            elif billed and sent is not None:
                costs = Costs(self.ceiling(route, *sent), None)
            else:
                costs = NO_COST
        if reservation is not None:
            self._budget.settle(reservation, costs.incremental, now)
        elif costs.incremental and route.rung is not None:
            self._budget.spend(
                route.rung, call.client_key, costs.incremental, now, request_id=call.request_id
            )
        return costs


def price(
    route: Route, usage: ReportedUsage, *, overage: bool = False, prices: PriceBook | None = None
) -> Costs:
    """The request's incremental and list-price cost, at the config's `prices:` where it
    prices the model, else at list price.

    A plan request served past its quota (`overage`: Claude's extra usage, Codex credits)
    is billed like a metered one, so it costs its list price."""
    rates = (prices or _LIST_PRICES).rates(route.connection.provider, route.target.model)
    listed = (
        None
        if rates is None
        else rates.cost(
            TokenCounts(
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_tokens,
                usage.cache_write_tokens,
            )
        )
    )
    if route.rung not in PAID_RUNGS and not overage:
        return Costs(0.0, listed if listed is not None else usage.cost_usd)
    billed = usage.cost_usd if usage.cost_usd is not None else listed
    return Costs(billed or 0.0, listed if listed is not None else usage.cost_usd)


def over_budget(
    shortfalls: list[Shortfall | BudgetUnavailable],
    now: float,
    plan_reset_at: float | None = None,
) -> Refusal:
    """The refusal for a request whose every paid route was over a budget, or whose
    budgets could not be checked.

    Its `Retry-After` is the first moment any route could take the request: the budget's
    reset, or `plan_reset_at`, when a plan connection the ladder skipped for its quota or a
    cooldown is usable again, if that comes sooner."""
    unchecked = next((each for each in shortfalls if isinstance(each, BudgetUnavailable)), None)
    if unchecked is not None:
        return budget_store_unavailable(unchecked)
    over = [each for each in shortfalls if isinstance(each, Shortfall)]
    key = next((each for each in over if each.account == "key"), None)
    if key is not None:
        message = (
            f"client key {key.name!r} has spent its ${key.budget_usd:g} budget for this "
            f"{key.period} (it resets at {_utc(key.resets_at)}); raise client_keys[].budget_usd "
            "or wait for the reset"
        )
        wait = _sooner(key.resets_at, plan_reset_at, now)
        return Refusal(
            429, message + _plan_first(wait, key.resets_at, now), "budget_exhausted", wait
        )
    rungs = sorted({each.name for each in over})
    period = over[0].period if over else "period"
    # The first budget to reset is the first that can take the request again.
    resets_at = min((each.resets_at for each in over), default=None)
    message = (
        f"the budget of the {' and '.join(rungs)} rung for this {period} cannot take this "
        "request's maximum cost"
        + (f" (it resets at {_utc(resets_at)})" if resets_at is not None else "")
        + _what_to_do(over)
    )
    wait = _sooner(resets_at, plan_reset_at, now)
    message += _plan_first(wait, resets_at, now)
    return Refusal(429, message, code="budget_exhausted", retry_after_s=wait)


def _sooner(budget_reset: float | None, plan_reset: float | None, now: float) -> float | None:
    """Seconds until the first of the budget's reset and a plan's reset (at least 1)."""
    resets = [at for at in (budget_reset, plan_reset) if at is not None and at > now]
    return max(1.0, min(resets) - now) if resets else None


def _plan_first(wait: float | None, budget_reset: float | None, now: float) -> str:
    """The message's note when a plan's reset, not the budget's, sets the retry moment."""
    if wait is None or (budget_reset is not None and budget_reset - now <= wait):
        return ""
    return f"; a plan connection is usable again sooner: retry after {wait:.0f}s"


def budget_store_unavailable(unchecked: BudgetUnavailable) -> Refusal:
    """The refusal for a request whose budgeted paid routes could not be checked."""
    whose = (
        f"client key {unchecked.name!r}"
        if unchecked.account == "key"
        else f"the {unchecked.name} rung"
    )
    message = (
        f"the budget store ({unchecked.store}) does not answer, so the budget of {whose} "
        "cannot be checked and no other route could serve this request; budgeted paid rungs "
        "refuse until it answers rather than spend unmetered: check that Redis is running "
        "and that state.redis.url points at it"
    )
    if not unchecked.store.startswith("redis"):
        # The spend could not be read from the ledger: Redis is not the one to blame.
        message = (
            f"the spend of {whose} cannot be read from {unchecked.store}, so its budget "
            "cannot be checked and no other route could serve this request; budgeted paid "
            "rungs refuse until it can rather than spend unmetered"
        )
    return Refusal(503, message, code="budget_store_unavailable", retry_after_s=5.0)


def _what_to_do(over: list[Shortfall]) -> str:
    """The refusal's advice: the output limit that fits what is left, worded for a request
    that set one or for one that held its model's whole output limit."""
    sets_limit = all(each.sets_output_limit for each in over)
    # The rung with the most room left is the one a smaller request would fit.
    best = max(over, key=lambda each: each.fits_output or 0, default=None)
    fits = best.fits_output if best is not None else None
    if fits is None or best is None or best.available_usd is None:
        if sets_limit:
            return "; raise ladder.rung_budget_usd or lower max_tokens"
        return (
            "; it sets no max_tokens, so it holds as much output as its model can write: "
            "set max_tokens, or raise ladder.rung_budget_usd"
        )
    left = f"${best.available_usd:.4f}"
    if fits == 0:
        return f"; the remaining {left} cannot take even its input: raise ladder.rung_budget_usd"
    if sets_limit:
        return (
            f"; lower max_tokens to at most {fits} to fit the remaining {left}, "
            "or raise ladder.rung_budget_usd"
        )
    return (
        "; it sets no max_tokens, so it holds as much output as its model can write: "
        f"set max_tokens to at most {fits} to fit the remaining {left}, "
        "or raise ladder.rung_budget_usd"
    )


def _utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M UTC")
