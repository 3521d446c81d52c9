"""What a run did with a pool: quota left at resets, cache hits, session moves and waits.

- **Unused quota at resets**: for every plan account and window, each reset that falls in
  the trace (after its first request, at or before its last) counts what the instance
  ending there left unused, as a share of its capacity (0 to 1; a window that ended full or
  past full counts 0). The sum is in *window-equivalents*: 2.5 means two and a half windows'
  worth of quota expired unused. It is kept per window name (`5h`, `7d`), summed over the
  accounts. A `fixed` or `midnight` window resets on its grid whether used or not (an idle
  instance counts 1); a `first_use` window has instances only where a request opened one.
  Every policy is counted over the same resets, so the figures compare.
- **Cache-hit share**: cache-read tokens over all input tokens (input, cache reads and
  writes) of the served requests, as the replay's prompt cache served them. For a run
  without the replay's counts (the oracle), its placements are put through the same cache.
- **Session moves**: turns of a session served by another connection than its previous
  served turn (a refused turn moves nothing).
- **Waits**: requests held for a plan's reset, and the seconds they waited.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from rungway.whatif.metrics import ratio
from rungway.whatif.outcome import PolicyRun, World
from rungway.whatif.plans import PlanWindow
from rungway.whatif.prompt_cache import PromptCache
from rungway.whatif.trace import Trace

__all__ = ["PoolMetrics", "cache_hit_share", "measure_pool", "session_moves", "unused_at_resets"]


@dataclass(frozen=True)
class PoolMetrics:
    """One policy's pool figures."""

    policy: str
    paid_usd: float
    ratio_to_bound: float | None
    """Paid spend over the oracle's bound (None without an oracle run)."""
    unused: dict[str, float]
    """Window-equivalents left unused at resets, per window name."""
    resets: dict[str, int]
    """Resets counted, per window name."""
    cache_hit_share: float
    moves: int
    waits: int
    waited_s: float

    def to_json(self) -> dict[str, Any]:
        """A plain JSON object for `--json`."""
        return {
            "policy": self.policy,
            "paid_usd": self.paid_usd,
            "ratio_to_bound": (
                None
                if self.ratio_to_bound is None or math.isinf(self.ratio_to_bound)
                else self.ratio_to_bound
            ),
            "unused_windows": self.unused,
            "resets": self.resets,
            "cache_hit_share": self.cache_hit_share,
            "session_moves": self.moves,
            "waits": self.waits,
            "waited_s": self.waited_s,
        }


def measure_pool(
    run: PolicyRun, trace: Trace, world: World, oracle: PolicyRun | None = None
) -> PoolMetrics:
    """The pool figures of `run` over `trace`, against `oracle`'s bound when given."""
    paid = math.fsum(p.cost_usd for p in run.placements)
    bound = None
    if oracle is not None:
        bound = oracle.bound_usd
        if bound is None:
            bound = math.fsum(p.cost_usd for p in oracle.placements)
    unused, resets = unused_at_resets(run, world, trace)
    return PoolMetrics(
        policy=run.policy,
        paid_usd=paid,
        ratio_to_bound=None if bound is None else ratio(paid, bound),
        unused=unused,
        resets=resets,
        cache_hit_share=cache_hit_share(run, trace),
        moves=session_moves(run, trace),
        waits=len(run.waits),
        waited_s=math.fsum(run.waits),
    )


def unused_at_resets(
    run: PolicyRun, world: World, trace: Trace
) -> tuple[dict[str, float], dict[str, int]]:
    """Window-equivalents left unused at the resets within `trace`, and the resets counted,
    per window name."""
    unused: dict[str, float] = {}
    resets: dict[str, int] = {}
    if not trace:
        return unused, resets
    first, last = trace[0].at, trace[-1].at
    # Keyed by the start to the second: the oracle's grid and the replay's may differ in
    # the last bit of a float.
    used: dict[tuple[str, str, int], float] = {}
    for use in run.window_use:
        key = (use.connection_id, use.window, round(use.start))
        used[key] = used.get(key, 0.0) + use.used
    for connection_id, quota in world.plans.items():
        for window in quota.windows:
            if window.alignment == "first_use":
                ends = [
                    (use.start, use.end)
                    for use in run.window_use
                    if use.connection_id == connection_id and use.window == window.name
                ]
            else:
                ends = list(_grid(window, first, last))
            for start, end in ends:
                if not first < end <= last:
                    continue
                held = used.get((connection_id, window.name, round(start)), 0.0)
                left = max(0.0, 1.0 - held / window.capacity)
                unused[window.name] = unused.get(window.name, 0.0) + left
                resets[window.name] = resets.get(window.name, 0) + 1
    return unused, resets


def _grid(window: PlanWindow, first: float, last: float) -> Iterator[tuple[float, float]]:
    """The instances of a `fixed` or `midnight` window from the one holding `first` to the
    one holding `last`."""
    if window.alignment == "fixed":
        length = window.length_s
        start = window.anchor + math.floor((first - window.anchor) / length) * length
        while start <= last:
            yield start, start + length
            start += length
        return
    zone = ZoneInfo(window.zone)
    day = datetime.fromtimestamp(first, zone).date()
    while True:
        start = datetime.combine(day, time(0), tzinfo=zone).timestamp()
        if start > last:
            return
        day += timedelta(days=1)
        yield start, datetime.combine(day, time(0), tzinfo=zone).timestamp()


def cache_hit_share(run: PolicyRun, trace: Trace) -> float:
    """Cache reads over all input of the served requests (0 when nothing was served)."""
    counts = run.cache or _cache_counts(run, trace)
    everything = sum(total for _, total in counts)
    return sum(read for read, _ in counts) / everything if everything else 0.0


def _cache_counts(run: PolicyRun, trace: Trace) -> tuple[tuple[int, int], ...]:
    """`run`'s placements put through the replay's prompt cache."""
    cache = PromptCache()
    counts = []
    for placement, request in zip(run.placements, trace, strict=True):
        connection_id = placement.connection_id
        if connection_id is None:
            counts.append((0, 0))
            continue
        served = cache.as_served(request, connection_id, request.at)
        cache.served(served, connection_id, request.at)
        inputs = served.input_tokens + served.cache_read_tokens + served.cache_write_tokens
        counts.append((served.cache_read_tokens, inputs))
    return tuple(counts)


def session_moves(run: PolicyRun, trace: Trace) -> int:
    """Served turns of a session on another connection than its previous served turn."""
    last: dict[str, str] = {}
    moves = 0
    for placement, request in zip(run.placements, trace, strict=True):
        if request.session is None or placement.connection_id is None:
            continue
        before = last.get(request.session)
        if before is not None and before != placement.connection_id:
            moves += 1
        last[request.session] = placement.connection_id
    return moves
