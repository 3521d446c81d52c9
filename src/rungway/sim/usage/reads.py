"""Who may read a usage endpoint, and how often.

Every provider's usage endpoint answers only its own credential and is itself rate
limited: past `usage_reads_per_hour` reads in the last hour it answers 429 with
`Retry-After` (docs/provider-signals.md A2.5 and the Appendix, "polled too fast"). The
endpoints differ only in the shape of their refusals, which each one supplies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rungway.clock import Clock
from rungway.sim.credential import Authenticate
from rungway.sim.exchange import RecordedRequest, Reply

TooMany = Callable[[int], Reply]
"""The provider's 429 for a reader who must wait this many whole seconds."""
HOUR_S = 3600.0


class UsageReads:
    """Admits reads of one usage endpoint: an accepted credential, `per_hour` an hour."""

    __slots__ = ("_authenticate", "_clock", "_per_hour", "_reads", "_too_many")

    def __init__(
        self, per_hour: int, clock: Clock, authenticate: Authenticate, too_many: TooMany
    ) -> None:
        self._per_hour = per_hour
        self._clock = clock
        self._authenticate = authenticate
        self._too_many = too_many
        self._reads: list[float] = []

    def admit(self, request: RecordedRequest) -> Reply | None:
        """None when the read may be answered (and count it), else the refusal."""
        refused = self._authenticate(request)
        if refused is not None:
            return refused
        now = self._clock.now()
        self._reads = [at for at in self._reads if at > now - HOUR_S]
        if len(self._reads) >= self._per_hour:
            return self._too_many(int(self._reads[0] + HOUR_S - now) + 1)
        self._reads.append(now)
        return None

    def reset(self) -> None:
        """Forget past reads."""
        self._reads.clear()


def retry_after(wait_s: int) -> tuple[bytes, bytes]:
    """The `Retry-After` header for a wait in whole seconds."""
    return (b"retry-after", str(wait_s).encode())


Render = Callable[[RecordedRequest], Reply]


@dataclass(frozen=True, slots=True)
class SimUsageEndpoint:
    """One provider's usage endpoint: its routes, its read gate and its body."""

    routes: frozenset[tuple[str, str]]
    """The (method, path) pairs it answers."""
    reads: UsageReads
    render: Render

    def serves(self, request: RecordedRequest) -> bool:
        """Whether the request is for this endpoint."""
        return (request.method, request.path) in self.routes

    def answer(self, request: RecordedRequest) -> Reply:
        """The usage body, or the endpoint's own 401 or 429."""
        refused = self.reads.admit(request)
        return refused if refused is not None else self.render(request)

    def reset(self) -> None:
        """Forget past reads (the read limit starts afresh)."""
        self.reads.reset()
