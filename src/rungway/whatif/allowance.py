"""A plan connection's simulated allowance: its windows' use, rolled forward on the replay's clock.

A request is admitted unless a window that applies to it is already at or over capacity,
and admission charges every applicable window with the request's whole use: the rule the
simulated upstreams follow (`sim/quota/windows.py`), so a replay and a served gateway in
front of a simulated upstream see the same refusals. A refused request charges nothing.

Each window instance that held a request is kept as a `WindowUse` when it ends (or when the
replay asks for the history), for utilisation and for the re-entry lag after each reset.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, time
from zoneinfo import ZoneInfo

from rungway.sim.quota.windows import Admission, WindowReading, next_midnight
from rungway.sim.scenario import WindowSpec
from rungway.whatif.outcome import WindowUse
from rungway.whatif.plans import PlanQuota, PlanWindow
from rungway.whatif.trace import TraceRequest

__all__ = ["Allowance", "header_name"]

_COST_SCALE = 1_000_000.0
"""A cost window is reported upstream in micro-dollars, so its utilisation keeps its precision."""


@dataclass(slots=True)
class _Instance:
    window: PlanWindow
    spec: WindowSpec
    scale: float
    start: float | None = None
    end: float | None = None
    used: float = 0.0


class Allowance:
    """The windows of one plan connection and what each has used."""

    __slots__ = ("_instances", "connection_id", "history")

    def __init__(self, quota: PlanQuota, header_names: dict[str, str] | None = None) -> None:
        names = header_names or {}
        self.connection_id = quota.connection_id
        self._instances = [
            _Instance(window, _spec(window, names.get(window.name, window.name)), _scale(window))
            for window in quota.windows
        ]
        self.history: list[WindowUse] = []

    def admits(self, model: str, now: float) -> bool:
        """Whether every window applying to `model` has room at `now`."""
        self._roll(now)
        return all(
            instance.used < instance.window.capacity
            for instance in self._instances
            if instance.window.model is None or instance.window.model == model
        )

    def charge(self, model: str, request: TraceRequest, list_cost: float, now: float) -> None:
        """Count an admitted request against every window applying to `model`."""
        self._roll(now)
        for instance in self._instances:
            window = instance.window
            if window.model is not None and window.model != model:
                continue
            if instance.start is None:
                instance.start = now
                instance.end = now + window.length_s
            if window.unit == "requests":
                instance.used += 1
            elif window.unit == "tokens":
                instance.used += request.tokens
            else:
                instance.used += list_cost

    def admission(self, model: str, now: float, *, admitted: bool) -> Admission:
        """The windows applying to `model` at `now`, as a simulated upstream reports them."""
        self._roll(now)
        readings = []
        for instance in self._instances:
            window = instance.window
            if window.model is not None and window.model != model:
                continue
            reset_at = instance.end if instance.end is not None else now + window.length_s
            used = math.ceil(instance.used * instance.scale - 1e-9)
            readings.append(WindowReading(instance.spec, used, reset_at))
        return Admission(admitted, tuple(readings), now)

    def finish(self, now: float) -> list[WindowUse]:
        """Every window instance that held use, the open ones cut at `now`."""
        self._roll(now)
        open_ones = [
            use for instance in self._instances if (use := self._use(instance)) is not None
        ]
        return sorted([*self.history, *open_ones], key=lambda use: (use.window, use.start))

    def _use(self, instance: _Instance) -> WindowUse | None:
        """What `instance` held, or None when it held nothing."""
        if instance.start is None or instance.end is None or instance.used <= 0:
            return None
        window = instance.window
        return WindowUse(
            self.connection_id,
            window.name,
            instance.start,
            instance.end,
            instance.used,
            window.capacity,
        )

    def _roll(self, now: float) -> None:
        for instance in self._instances:
            if instance.end is not None and now < instance.end:
                continue
            if (use := self._use(instance)) is not None:
                self.history.append(use)
            instance.used = 0.0
            instance.start, instance.end = _bounds(instance.window, now)


def _bounds(window: PlanWindow, now: float) -> tuple[float | None, float | None]:
    """The instance of `window` that holds `now`; (None, None) until a first use opens one."""
    if window.alignment == "first_use":
        return None, None
    if window.alignment == "fixed":
        length = window.length_s
        start = window.anchor + math.floor((now - window.anchor) / length) * length
        return start, start + window.length_s
    zone = ZoneInfo(window.zone)
    today = datetime.fromtimestamp(now, zone).date()
    start = datetime.combine(today, time(0), tzinfo=zone).timestamp()
    return start, next_midnight(now, window.zone)


def header_name(window: PlanWindow, position: int) -> str:
    """A header-safe name for `window`: its own when it can be spelt in a header."""
    cleaned = "".join(c if c.isalnum() or c in "_-" else "_" for c in window.name)
    return cleaned or f"w{position}"


def _spec(window: PlanWindow, name: str) -> WindowSpec:
    return WindowSpec(
        name=name,
        unit="requests",
        capacity=max(1, round(window.capacity * _scale(window))),
        length_s=window.length_s,
        model=window.model,
    )


def _scale(window: PlanWindow) -> float:
    return _COST_SCALE if window.unit == "cost" else 1.0
