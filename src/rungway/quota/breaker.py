"""A circuit breaker per connection: open after repeated server errors and timeouts.

Closed: requests flow. After `threshold` failures in a row it opens: the ladder skips the
connection. After `half_open_after_s` it is half-open: `auto/thrifty` may send one probe;
a success closes it, a failure opens it again.
"""

from __future__ import annotations

from dataclasses import dataclass

from rungway.protocol.failures import FailureClass
from rungway.routing.snapshot import BreakerState

TRIPPING = frozenset({FailureClass.SERVER, FailureClass.TIMEOUT, FailureClass.NETWORK})
"""Failures that say the connection itself is unwell."""


@dataclass(frozen=True, slots=True)
class BreakerPolicy:
    """When a breaker opens and how long it stays open."""

    threshold: int = 5
    half_open_after_s: float = 30.0


@dataclass(slots=True)
class Breaker:
    """One connection's breaker."""

    failures: int = 0
    opened_at: float | None = None

    def state(self, now: float, policy: BreakerPolicy) -> BreakerState:
        """The state at `now`: open turns half-open once the delay has passed."""
        if self.opened_at is None:
            return BreakerState.CLOSED
        if now - self.opened_at >= policy.half_open_after_s:
            return BreakerState.HALF_OPEN
        return BreakerState.OPEN

    def failed(self, now: float, policy: BreakerPolicy) -> None:
        """Count a tripping failure; a half-open probe that fails opens the breaker again."""
        self.failures += 1
        if self.failures >= policy.threshold or self.opened_at is not None:
            self.opened_at = now

    def succeeded(self) -> None:
        """Close the breaker."""
        self.failures = 0
        self.opened_at = None
