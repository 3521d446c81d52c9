"""What a policy did with a trace: where each request went, and how each plan window filled.

`World` is what every policy replays against: the parsed settings (the same file `serve`
reads), each plan connection's simulated quota, and the prices the ledger uses.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from rungway.config import Settings
from rungway.pricing.overrides import PriceBook
from rungway.whatif.plans import PlanQuota
from rungway.whatif.trace import Trace

__all__ = ["Placement", "Policy", "PolicyRun", "WindowUse", "World"]


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one request of the trace went, and what it cost."""

    index: int
    """Its position in the trace."""
    connection_id: str | None
    """The connection that served it; None when it was refused."""
    rung: int | None
    """The ladder rung it was served on (0 is the plan); None off the ladder or refused."""
    cost_usd: float
    """What was paid for it: 0 on a plan, a keyless or a free connection."""
    list_cost_usd: float
    """Its list price at the model it was (or would have been) served by."""
    refusal: str | None = None
    """Why it was refused (a budget, no quota left, no route), when it was."""

    def __post_init__(self) -> None:
        if self.index < 0:
            raise ValueError(f"index must be at least 0, not {self.index}")
        if (self.connection_id is None) != (self.refusal is not None):
            raise ValueError("a placement is either served (a connection) or refused (a reason)")
        for name in ("cost_usd", "list_cost_usd"):
            value: float = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite amount of at least 0, not {value}")


@dataclass(frozen=True, slots=True)
class WindowUse:
    """One instance of a plan window, from its start to its reset, and what it held."""

    connection_id: str
    window: str
    start: float
    end: float
    used: float
    capacity: float


@dataclass(frozen=True)
class PolicyRun:
    """A policy's placements, one per trace request in order, and its plan windows' use."""

    policy: str
    placements: tuple[Placement, ...]
    window_use: tuple[WindowUse, ...] = ()
    times: tuple[float, ...] = field(default=(), compare=False)
    """The trace's arrival times by index, so metrics need only the run; may be empty."""
    bound_usd: float | None = field(default=None, compare=False)
    """A proven lower bound on paid spend, when the policy has one (the oracle's LP optimum)."""
    cache: tuple[tuple[int, int], ...] = field(default=(), compare=False)
    """Per placement, the cache-read tokens it was served with and all its input tokens
    (input, cache reads and writes), when the replay kept a prompt cache; may be empty."""
    waits: tuple[float, ...] = field(default=(), compare=False)
    """The seconds each request held for a plan's reset waited (`ladder.max_wait_s`)."""

    def __post_init__(self) -> None:
        for position, placement in enumerate(self.placements):
            if placement.index != position:
                raise ValueError(
                    f"placement {position} of {self.policy!r} is for request {placement.index}"
                )
        if self.times and len(self.times) != len(self.placements):
            raise ValueError("times must give one arrival per placement")
        if self.cache and len(self.cache) != len(self.placements):
            raise ValueError("cache must give one pair of counts per placement")


@dataclass(frozen=True)
class World:
    """What a replay runs against: the config, each plan's simulated quota, the prices."""

    settings: Settings
    plans: Mapping[str, PlanQuota]
    """Simulated quota by plan connection id."""
    prices: PriceBook
    """The prices the ledger uses: the config's `prices:` over the list."""


class Policy(Protocol):
    """A way of placing requests: the ladder as served, a baseline, or the oracle."""

    name: str

    def run(self, trace: Trace, world: World, progress: Callable[[int], None]) -> PolicyRun:
        """Place every request of `trace`; `progress(n)` after each batch of `n` requests."""
        ...
