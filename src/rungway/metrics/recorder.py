"""The recorder the engine writes to: counts each row into the metrics, then hands it on."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import Counter, Histogram

from rungway.budget.local import Reservation
from rungway.engine.record import Recorder, RequestRecord
from rungway.metrics.registry import NONE, GatewayMetrics


@dataclass(frozen=True, slots=True)
class _Series:
    """The children of one (rung, connection, api, outcome)."""

    requests: Counter
    latency: Histogram


@dataclass(frozen=True, slots=True)
class _RungSeries:
    """The children of one rung."""

    input: Counter
    output: Counter
    cache_read: Counter
    cache_write: Counter
    spend: Counter
    list_spend: Counter


class MetricsRecorder:
    """A `Recorder` that updates the counters from each row and passes it to `inner`.

    It runs on the request path, so each label tuple's children are looked up once and
    kept: a row costs a dict lookup and a few increments, no label parsing.
    """

    def __init__(self, inner: Recorder, metrics: GatewayMetrics) -> None:
        self._inner = inner
        self._metrics = metrics
        self._series: dict[tuple[str, str, str, str], _Series] = {}
        self._rungs: dict[str, _RungSeries] = {}
        self._fell: dict[tuple[str, str], Counter] = {}

    def record(self, row: RequestRecord, settles: Reservation | None = None) -> None:
        """Hand `row` to the ledger first, then count it."""
        self._inner.record(row, settles)
        rung = row.rung or NONE
        key = (rung, row.connection_id or NONE, row.api, row.outcome)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = self._new_series(key)
        series.requests.inc()
        series.latency.observe(row.latency_ms / 1000)
        if row.upstream_ms is not None:
            self._metrics.overhead.observe(max(0.0, row.latency_ms - row.upstream_ms) / 1000)
        per_rung = self._rungs.get(rung)
        if per_rung is None:
            per_rung = self._rungs[rung] = self._new_rung(rung)
        usage = row.usage
        # Zero increments are skipped: most rows carry no cache tokens, and on the plan
        # and free rungs no cost.
        if usage.input_tokens:
            per_rung.input.inc(usage.input_tokens)
        if usage.output_tokens:
            per_rung.output.inc(usage.output_tokens)
        if usage.cache_read_tokens:
            per_rung.cache_read.inc(usage.cache_read_tokens)
        if usage.cache_write_tokens:
            per_rung.cache_write.inc(usage.cache_write_tokens)
        if row.cost_usd:
            per_rung.spend.inc(row.cost_usd)
        if row.list_cost_usd:
            per_rung.list_spend.inc(row.list_cost_usd)
        if row.attempts:
            self._count_fall_throughs(row)

    def _count_fall_throughs(self, row: RequestRecord) -> None:
        attempts = row.attempts
        fell = len(attempts)
        last = attempts[-1]
        # The last attempt fell through only if another connection then served the
        # request; a request that gave up, or whose serving attempt failed (a refusal
        # passed back, a stream broken after content), ends on it instead.
        if row.connection_id is None or last.connection_id == row.connection_id:
            fell -= 1
        for attempt in attempts[:fell]:
            key = (attempt.connection_id, attempt.outcome)
            counter = self._fell.get(key)
            if counter is None:
                counter = self._fell[key] = self._metrics.fall_throughs.labels(*key)
            counter.inc()

    def _new_series(self, key: tuple[str, str, str, str]) -> _Series:
        rung, _, _, outcome = key
        metrics = self._metrics
        return _Series(metrics.requests.labels(*key), metrics.latency.labels(rung, outcome))

    def _new_rung(self, rung: str) -> _RungSeries:
        tokens = self._metrics.tokens
        return _RungSeries(
            input=tokens.labels(rung, "input"),
            output=tokens.labels(rung, "output"),
            cache_read=tokens.labels(rung, "cache_read"),
            cache_write=tokens.labels(rung, "cache_write"),
            spend=self._metrics.spend.labels(rung),
            list_spend=self._metrics.list_spend.labels(rung),
        )
