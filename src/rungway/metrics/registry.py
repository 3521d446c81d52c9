"""The gateway's Prometheus metrics, each in a registry of its own gateway.

A dedicated `CollectorRegistry` (never the process-wide default) lets one process hold
several gateways, as the tests do, each with its own counts.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

LATENCY_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
    600.0,
)  # fmt: skip
"""Seconds: from a millisecond passthrough to a ten-minute stream."""
OVERHEAD_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
)  # fmt: skip
"""Seconds: what the gateway adds is measured in tenths of milliseconds."""
TOKEN_KINDS = ("input", "output", "cache_read", "cache_write")
NONE = "none"
"""The label value of a rung or connection a request never reached (it gave up, or was
refused before any attempt)."""


class GatewayMetrics:
    """Every counter and histogram the request path updates, in `registry`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        into = self.registry
        self.requests = Counter(
            "rungway_requests",
            "Requests by rung, connection, ingress API and outcome; a request refused without "
            "an attempt (budget_exhausted, subscription_unavailable, rate_limit_exceeded, ...) "
            "has rung and connection none and the refusal as its outcome.",
            ["rung", "connection", "api", "outcome"],
            registry=into,
        )
        self.latency = Histogram(
            "rungway_request_duration_seconds",
            "Time from reading a request to recording it (a stream's end), by rung and outcome.",
            ["rung", "outcome"],
            buckets=LATENCY_BUCKETS,
            registry=into,
        )
        self.overhead = Histogram(
            "rungway_gateway_overhead_seconds",
            "The gateway's own share of each request: its duration less the time spent "
            "waiting on upstreams.",
            buckets=OVERHEAD_BUCKETS,
            registry=into,
        )
        self.fall_throughs = Counter(
            "rungway_fall_throughs",
            "Failed attempts after which the request went on to another connection, by the "
            "connection that failed and its failure class.",
            ["connection", "failure"],
            registry=into,
        )
        self.tokens = Counter(
            "rungway_tokens",
            "Tokens by rung and kind (input excludes cache reads and writes).",
            ["rung", "kind"],
            registry=into,
        )
        self.spend = Counter(
            "rungway_spend_usd",
            "Incremental spend in US dollars by rung (0 on the plan, keyless and free rungs).",
            ["rung"],
            registry=into,
        )
        self.list_spend = Counter(
            "rungway_list_price_spend_usd",
            "What the same tokens cost at list price, in US dollars, by rung.",
            ["rung"],
            registry=into,
        )
