"""Session affinity's figures, read from the pin store when `/metrics` is scraped.

The request path only pins; the counts are read here, so affinity adds nothing to a
request's metrics work.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from rungway.clock import Clock
from rungway.engine.pins import PinStore


class SessionCollector(Collector):
    """`rungway_session_moves_total` and `rungway_sessions_pinned` per connection."""

    def __init__(self, pins: PinStore, clock: Clock, connection_ids: Iterable[str]) -> None:
        self._pins = pins
        self._clock = clock
        self._ids = tuple(connection_ids)

    def collect(self) -> Iterator[Metric]:
        """The moves this process made, and the live sessions each connection holds."""
        moves = CounterMetricFamily(
            "rungway_session_moves",
            "Sessions this process moved from the connection they were pinned to onto "
            "another (the pinned account was spent or resting, or failed the turn).",
        )
        moves.add_metric([], float(self._pins.moves))
        yield moves
        pinned = GaugeMetricFamily(
            "rungway_sessions_pinned",
            "Live sessions this process knows pinned to each connection.",
            labels=["connection"],
        )
        counts = self._pins.pinned_counts(self._clock.now())
        for connection_id in self._ids:
            pinned.add_metric([connection_id], float(counts.get(connection_id, 0)))
        yield pinned
