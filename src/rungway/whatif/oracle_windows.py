"""The window instances the oracle fills: where each one starts and ends, and what it holds.

A window's instances are laid over the times of the requests it could count (those its
plan could serve, of its model when it is a per-model window), sorted, so each instance
holds a contiguous run of them:

- `fixed`: the grid of `length_s` from `anchor`;
- `midnight`: one local day in `zone`, midnight to midnight (a day of 23 or 25 hours
  across a clock change, as the provider's reset follows the wall clock);
- `first_use`: the first instance starts at the first request the plan could serve, and
  each next one at the first such request at or after the previous one's end.

For `first_use` this is the alignment a policy gets when it sends the plan a request as
soon as a window has reset, which the ladder does (its re-entry lag is zero). The
oracle's windows are therefore the ladder's, and its bound holds against every policy
with those windows. A policy that leaves the plan idle past a reset starts its next window
later, on requests of its own choosing; the oracle does not search over those shifts
(that is a choice per window, not a linear one), so against such a policy its figure is
the optimum for the ladder's alignment rather than a proven bound.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

try:
    import numpy as np
    import numpy.typing as npt
except ImportError as missing:  # pragma: no cover - the base install has no solver
    raise ImportError(
        "the what-if oracle needs numpy and scipy, which the base install leaves out: "
        "pip install 'rungway[whatif]'"
    ) from missing

from rungway.whatif.plans import PlanWindow


@dataclass(frozen=True, slots=True)
class Instance:
    """One instance of a window: [start, end), and the slice of the times it holds."""

    start: float
    end: float
    first: int
    stop: int


def instances(window: PlanWindow, times: npt.NDArray[np.float64]) -> Iterator[Instance]:
    """The instances of `window` over the sorted `times` of the requests it could count."""
    bounds = _bounds(window)
    position, count = 0, len(times)
    while position < count:
        start, end = bounds(float(times[position]))
        stop = int(np.searchsorted(times, end, side="left"))
        # A bound never ends at or before the time it was asked for, so this always moves.
        stop = max(stop, position + 1)
        yield Instance(start, end, position, stop)
        position = stop


def _bounds(window: PlanWindow) -> Callable[[float], tuple[float, float]]:
    length = window.length_s
    if window.alignment == "first_use":
        return lambda at: (at, at + length)
    if window.alignment == "fixed":
        anchor = window.anchor

        def on_grid(at: float) -> tuple[float, float]:
            start = anchor + ((at - anchor) // length) * length
            return start, start + length

        return on_grid
    zone = ZoneInfo(window.zone)

    def local_day(at: float) -> tuple[float, float]:
        day = datetime.fromtimestamp(at, zone).date()
        start = datetime.combine(day, time(0), tzinfo=zone).timestamp()
        end = datetime.combine(day + timedelta(days=1), time(0), tzinfo=zone).timestamp()
        return start, end

    return local_day
