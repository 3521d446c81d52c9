"""Gauges read at scrape time: quota windows, cooldowns, breakers and budgets as they are now."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from rungway.clock import Clock
from rungway.engine.state import StateSource
from rungway.routing.rungs import Rung
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import BreakerState, ConnectionState, RungSpend

RungSpendOf = Callable[[float], Mapping[Rung, RungSpend]]
BREAKER_VALUES = {BreakerState.CLOSED: 0.0, BreakerState.HALF_OPEN: 1.0, BreakerState.OPEN: 2.0}
"""`rungway_breaker_state`: 0 closed, 1 half-open, 2 open."""
_WINDOW_LABELS = ["connection", "window", "model"]


class StateCollector(Collector):
    """Reads the live quota board and the budget each time `/metrics` is scraped.

    Nothing is kept between scrapes, so a gauge never shows a state older than the scrape.
    """

    def __init__(
        self,
        *,
        connection_ids: Iterable[str],
        state: StateSource,
        clock: Clock,
        ladder: LadderSettings,
        rung_spend: RungSpendOf,
    ) -> None:
        self._ids = tuple(connection_ids)
        self._state = state
        self._clock = clock
        self._ladder = ladder
        self._rung_spend = rung_spend

    def collect(self) -> Iterator[Metric]:
        """One family per gauge, with a sample per connection, window or rung."""
        now = self._clock.now()
        states = self._state.connection_states(now)
        remaining = GaugeMetricFamily(
            "rungway_quota_remaining_percent",
            "Percent of a quota window left at its last reading (model is empty for a "
            "connection-wide window).",
            labels=_WINDOW_LABELS,
        )
        resets = GaugeMetricFamily(
            "rungway_quota_reset_seconds",
            "Seconds until a quota window resets (0 once its reset instant has passed).",
            labels=_WINDOW_LABELS,
        )
        cooldown = GaugeMetricFamily(
            "rungway_cooldown_active",
            "1 while a connection rests after a failure, else 0.",
            labels=["connection"],
        )
        breaker = GaugeMetricFamily(
            "rungway_breaker_state",
            "A connection's circuit breaker: 0 closed, 1 half-open, 2 open.",
            labels=["connection"],
        )
        for connection_id in self._ids:
            state = states.get(connection_id, ConnectionState())
            for window in state.windows:
                labels = [connection_id, window.name, window.model or ""]
                if window.used_percent is not None:
                    remaining.add_metric(labels, max(0.0, 100.0 - window.used_percent))
                if window.resets_at is not None:
                    resets.add_metric(labels, max(0.0, window.resets_at - now))
            cooling = state.cooldown_until is not None and state.cooldown_until > now
            cooldown.add_metric([connection_id], 1.0 if cooling else 0.0)
            breaker.add_metric([connection_id], BREAKER_VALUES[state.breaker])
        yield remaining
        yield resets
        yield cooldown
        yield breaker
        yield self._budgets(now)

    def _budgets(self, now: float) -> GaugeMetricFamily:
        family = GaugeMetricFamily(
            "rungway_budget_remaining_usd",
            "What a rung's budget still allows this budget period, in US dollars: the "
            "budget less what is spent and what open attempts hold.",
            labels=["rung"],
        )
        spend = self._rung_spend(now)
        for rung in Rung:
            budget = self._ladder.budget_for(rung)
            if budget is None:
                continue
            used = spend.get(rung, RungSpend(0.0))
            family.add_metric([rung.label], max(0.0, budget - used.spent_usd - used.reserved_usd))
        return family
