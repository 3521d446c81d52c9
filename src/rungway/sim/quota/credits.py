"""An OpenRouter key's credits: what each request costs, what is left, and the 402.

Per docs/provider-signals.md A7: cost is in credits (about USD), priced per token; a key
has an optional `limit` (null = unlimited) that may reset each UTC day, week (from
Monday) or month; usage is also reported per day, week and month. A request the
remaining credits cannot cover, or any request once the balance is negative (even on a
`:free` model), is refused with 402 before anything is charged. Completed replies are
charged, as the tally counts them; a reply cut short by a fault costs nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import orjson
from pydantic import BaseModel, ConfigDict

from rungway.clock import Clock
from rungway.sim.exchange import Reply
from rungway.sim.scenario import CreditReset, CreditsSpec, ModelSpec

PERIODS: tuple[CreditReset, ...] = ("daily", "weekly", "monthly")
INSUFFICIENT_MESSAGE = "Insufficient credits. Add more using https://openrouter.ai/credits"


@dataclass(frozen=True, slots=True)
class Cost:
    """What one request costs, split the way `usage.cost_details` reports it."""

    prompt: float
    completion: float

    @property
    def total(self) -> float:
        """Prompt plus completion cost."""
        return self.prompt + self.completion


def cost_of(model: ModelSpec, input_tokens: int, output_tokens: int) -> Cost:
    """Tokens times the model's per-million prices (an unpriced model is free)."""
    return Cost(
        prompt=input_tokens * (model.input_per_mtok or 0.0) / 1_000_000,
        completion=output_tokens * (model.output_per_mtok or 0.0) / 1_000_000,
    )


def period_start(period: CreditReset, now: float) -> float:
    """Start of the UTC day, week (Monday) or month containing `now`."""
    day = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "weekly":
        day -= timedelta(days=day.weekday())
    elif period == "monthly":
        day = day.replace(day=1)
    return day.timestamp()


class CreditState(BaseModel):
    """A key's credits at one instant, as `GET /_sim/state` and `/api/v1/key` report them."""

    model_config = ConfigDict(frozen=True)

    limit: float | None
    limit_reset: CreditReset | None
    limit_remaining: float | None
    usage: float
    usage_daily: float
    usage_weekly: float
    usage_monthly: float


def insufficient_credits() -> Reply:
    """OpenRouter's 402: HTTP status equal to `error.code`, nothing charged."""
    body = {"error": {"code": 402, "message": INSUFFICIENT_MESSAGE}}
    return Reply(402, orjson.dumps(body))


class CreditLedger:
    """Credits spent by one key, rolled into UTC periods lazily against the clock."""

    __slots__ = ("_clock", "_limit_spent", "_limit_start", "_lock", "_models", "_periods", "_spec")

    def __init__(self, spec: CreditsSpec, models: Sequence[ModelSpec], clock: Clock) -> None:
        self._spec = spec
        self._models = {model.id: model for model in models}
        self._clock = clock
        self._lock = threading.Lock()
        self._periods: dict[CreditReset | None, list[float]] = {}
        self._limit_spent = 0.0
        self._limit_start: float | None = None
        self.reset()

    def reset(self) -> None:
        """Nothing spent, the whole limit left."""
        now = self._clock.now()
        with self._lock:
            # None is the all-time total; each period keeps [start, spent].
            self._periods = {None: [0.0, 0.0]}
            self._periods.update({period: [period_start(period, now), 0.0] for period in PERIODS})
            self._limit_spent = 0.0
            self._limit_start = self._limit_period(now)

    def _limit_period(self, now: float) -> float | None:
        return None if self._spec.reset is None else period_start(self._spec.reset, now)

    def _roll(self, now: float) -> None:
        for period in PERIODS:
            start = period_start(period, now)
            if self._periods[period][0] != start:
                self._periods[period] = [start, 0.0]
        limit_start = self._limit_period(now)
        if limit_start != self._limit_start:
            self._limit_start = limit_start
            self._limit_spent = 0.0

    def _remaining(self) -> float | None:
        limit = self._spec.limit
        return None if limit is None else limit - self._limit_spent

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> Cost:
        """What a request for `model` with this usage costs."""
        return cost_of(self._models[model], input_tokens, output_tokens)

    def refusal(self, model: str, input_tokens: int, output_tokens: int) -> Reply | None:
        """The 402 when the remaining credits cannot cover this reply, else None."""
        price = self.cost(model, input_tokens, output_tokens)
        with self._lock:
            self._roll(self._clock.now())
            remaining = self._remaining()
        if remaining is not None and remaining < price.total:
            return insufficient_credits()
        return None

    def settle(self, model: str, input_tokens: int, output_tokens: int) -> None:
        """Charge a completed reply."""
        price = self.cost(model, input_tokens, output_tokens)
        with self._lock:
            self._roll(self._clock.now())
            for spent in self._periods.values():
                spent[1] += price.total
            self._limit_spent += price.total

    def set_remaining(self, remaining: float) -> None:
        """Make `remaining` credits (possibly negative) left under the limit."""
        limit = self._spec.limit
        if limit is None:
            raise ValueError("this key has no credit limit (limit: null)")
        with self._lock:
            self._roll(self._clock.now())
            self._limit_spent = limit - remaining

    def state(self) -> CreditState:
        """The credits now."""
        with self._lock:
            self._roll(self._clock.now())
            return CreditState(
                limit=self._spec.limit,
                limit_reset=self._spec.reset,
                limit_remaining=self._remaining(),
                usage=self._periods[None][1],
                usage_daily=self._periods["daily"][1],
                usage_weekly=self._periods["weekly"][1],
                usage_monthly=self._periods["monthly"][1],
            )
