"""One budget as a shared store keeps it: its Redis keys per period, and its mirror."""

from __future__ import annotations

from rungway.budget.local import Grouping
from rungway.budget.period import Period, period_bounds
from rungway.cluster.budget_changes import Target
from rungway.cluster.link import RedisLink


class Account:
    """One budget's keys and its mirrored figures."""

    __slots__ = ("budget", "grouping", "holds", "name", "period", "reserved", "seen", "target")

    def __init__(
        self, link: RedisLink, grouping: Grouping, name: str, budget: float | None, period: Period
    ) -> None:
        self.grouping: Grouping = grouping
        self.name = name
        self.budget = budget
        self.period = period
        self.holds = link.key("budget", "holds", f"{grouping}:{name}")
        self.reserved = link.key("budget", "reserved", f"{grouping}:{name}")
        self.target = Target(grouping, name, float("-inf"), float("-inf"), "", "", "")
        self.seen = (float("nan"), 0.0, 0.0)
        """The mirror: the period start, its spend and the open holds, in US dollars."""

    def target_at(self, link: RedisLink, now: float) -> Target:
        """The keys of the period holding `now`."""
        target = self.target
        if not target.start <= now < target.end:
            target = self.target = self.target_of(link, period_bounds(self.period, now))
        return target

    def target_of(self, link: RedisLink, bounds: tuple[float, float]) -> Target:
        """The keys of the period `bounds`."""
        start, end = bounds
        spent = link.key("budget", "spent", f"{self.grouping}:{self.name}", str(int(start)))
        return Target(self.grouping, self.name, start, end, spent, self.holds, self.reserved)

    def figures(self, now_start: float) -> tuple[float, float]:
        """Spent and held in the period starting at `now_start`, as last mirrored."""
        start, spent, held = self.seen
        return (spent if start == now_start else 0.0), held
