"""The metrics recorder: counters from crafted ledger rows, each row still reaching the ledger."""

from __future__ import annotations

import pytest

from rungway.budget.local import Reservation
from rungway.engine.record import Attempt, RequestRecord
from rungway.metrics.recorder import MetricsRecorder
from rungway.metrics.registry import GatewayMetrics
from rungway.protocol.usage import ReportedUsage
from rungway.routing.rungs import Rung
from tests.records import request_record


class _Ledger:
    def __init__(self) -> None:
        self.rows: list[tuple[RequestRecord, Reservation | None]] = []

    def record(self, row: RequestRecord, settles: Reservation | None = None) -> None:
        self.rows.append((row, settles))


@pytest.fixture
def world() -> tuple[GatewayMetrics, _Ledger, MetricsRecorder]:
    metrics = GatewayMetrics()
    ledger = _Ledger()
    return metrics, ledger, MetricsRecorder(ledger, metrics)


def _value(metrics: GatewayMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_each_row_reaches_the_ledger_with_its_reservation(
    world: tuple[GatewayMetrics, _Ledger, MetricsRecorder],
) -> None:
    _, ledger, recorder = world
    row = request_record()
    reservation = Reservation(id=7, rung=Rung.CHEAP, client_key=None, amount=0.5, expires_at=0.0)
    recorder.record(row, settles=reservation)
    recorder.record(row)
    assert ledger.rows == [(row, reservation), (row, None)]


def test_requests_latency_and_overhead_are_counted_by_their_labels(
    world: tuple[GatewayMetrics, _Ledger, MetricsRecorder],
) -> None:
    metrics, _, recorder = world
    recorder.record(request_record(latency_ms=120.0, upstream_ms=119.5))
    recorder.record(request_record(latency_ms=2500.0, upstream_ms=2499.0))
    recorder.record(request_record(outcome="server", status=502, latency_ms=40.0))
    labels = {"rung": "subscription", "connection": "plan", "api": "anthropic_messages"}
    assert _value(metrics, "rungway_requests_total", **labels, outcome="ok") == 2
    assert _value(metrics, "rungway_requests_total", **labels, outcome="server") == 1
    ok = {"rung": "subscription", "outcome": "ok"}
    assert _value(metrics, "rungway_request_duration_seconds_count", **ok) == 2
    assert _value(metrics, "rungway_request_duration_seconds_sum", **ok) == pytest.approx(2.62)
    assert _value(metrics, "rungway_request_duration_seconds_bucket", **ok, le="0.25") == 1
    assert _value(metrics, "rungway_request_duration_seconds_bucket", **ok, le="5.0") == 2
    # Only rows that say how long they waited upstream tell the gateway's own share.
    assert _value(metrics, "rungway_gateway_overhead_seconds_count") == 2
    assert _value(metrics, "rungway_gateway_overhead_seconds_sum") == pytest.approx(0.0015)
    assert _value(metrics, "rungway_gateway_overhead_seconds_bucket", le="0.0005") == 1


def test_tokens_and_spend_are_summed_per_rung(
    world: tuple[GatewayMetrics, _Ledger, MetricsRecorder],
) -> None:
    metrics, _, recorder = world
    usage = ReportedUsage(
        input_tokens=100, output_tokens=20, cache_read_tokens=300, cache_write_tokens=5
    )
    recorder.record(request_record(usage=usage, list_cost_usd=0.01))
    recorder.record(
        request_record(
            rung="cheap", connection_id="cheap", usage=usage, cost_usd=0.002, list_cost_usd=0.002
        )
    )
    recorder.record(
        request_record(rung="cheap", connection_id="cheap", usage=ReportedUsage(input_tokens=1))
    )
    tokens = "rungway_tokens_total"
    assert _value(metrics, tokens, rung="subscription", kind="input") == 100
    assert _value(metrics, tokens, rung="subscription", kind="output") == 20
    assert _value(metrics, tokens, rung="subscription", kind="cache_read") == 300
    assert _value(metrics, tokens, rung="subscription", kind="cache_write") == 5
    assert _value(metrics, tokens, rung="cheap", kind="input") == 101
    assert _value(metrics, "rungway_spend_usd_total", rung="subscription") == 0
    assert _value(metrics, "rungway_list_price_spend_usd_total", rung="subscription") == 0.01
    assert _value(metrics, "rungway_spend_usd_total", rung="cheap") == pytest.approx(0.002)
    assert _value(metrics, "rungway_list_price_spend_usd_total", rung="cheap") == 0.002


def test_fall_throughs_count_the_attempts_before_the_serving_one(
    world: tuple[GatewayMetrics, _Ledger, MetricsRecorder],
) -> None:
    metrics, _, recorder = world
    overloaded = Attempt("plan", "overloaded", 529, 30.0)
    recorder.record(request_record(connection_id="api", attempts=(overloaded,)))
    # A give-up: the first failure fell through, the last ended the request.
    timeout = Attempt("api", "timeout", None, 1500.0)
    recorder.record(
        request_record(
            connection_id=None, rung=None, outcome="timeout", attempts=(overloaded, timeout)
        )
    )
    # The serving attempt's own failure (a stream broken after content) is no fall-through.
    broken = Attempt("api", "network", 200, 0.0)
    recorder.record(request_record(connection_id="api", outcome="network", attempts=(broken,)))
    fell = "rungway_fall_throughs_total"
    assert _value(metrics, fell, connection="plan", failure="overloaded") == 2
    assert _value(metrics, fell, connection="api", failure="timeout") is None
    assert _value(metrics, fell, connection="api", failure="network") is None
    gave_up = {"rung": "none", "connection": "none", "api": "anthropic_messages"}
    assert _value(metrics, "rungway_requests_total", **gave_up, outcome="timeout") == 1


def test_two_gateways_count_apart() -> None:
    first, second = GatewayMetrics(), GatewayMetrics()
    MetricsRecorder(_Ledger(), first).record(request_record())
    labels = {"rung": "subscription", "connection": "plan", "api": "anthropic_messages"}
    assert first.registry.get_sample_value("rungway_requests_total", {**labels, "outcome": "ok"})
    assert (
        second.registry.get_sample_value("rungway_requests_total", {**labels, "outcome": "ok"})
        is None
    )
