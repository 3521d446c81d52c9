"""What the ladder derives from a roster once and keeps with it: the plans' terms gate,
the static subscription skips, the groups serving each category, and per category and kind
of need the groups whose model can serve it."""

from __future__ import annotations

from bisect import bisect_left
from typing import NamedTuple

from rungway.models.capabilities import Structured
from rungway.routing.billing import BillingClass
from rungway.routing.gates import Verdict, capability_verdict, subscription_verdict
from rungway.routing.needs import RequestNeeds
from rungway.routing.plan import Skip, SkipReason
from rungway.routing.rungs import Rung
from rungway.routing.snapshot import ModelGroup, RosterConnection, Snapshot
from rungway.routing.terms import TermsGate


class Groups(NamedTuple):
    """The groups serving a category, and the skips of the others."""

    served: tuple[tuple[int, ModelGroup], ...]
    """Each with its roster order: (order, group), a plain tuple as the ladder's `_Entry` is."""
    skipped: tuple[Skip, ...]


class LadderIndex:
    """What the ladder derives from a roster once: static skips, groups per category, and
    per category and kind of need the groups whose model can serve it."""

    def __init__(self, snapshot: Snapshot) -> None:
        roster = snapshot.roster
        self.terms = TermsGate(roster.connections.values())
        self.subscription_skips: dict[str, Skip] = {}
        for connection in roster.connections.values():
            if connection.billing.live_overage:
                continue  # judged per decision, from the connection's live overage flag
            verdict = subscription_verdict(connection.billing)
            if not verdict.passed:
                self.subscription_skips[connection.id] = connection_skip(verdict, connection)
        self._by_category: dict[object, Groups] = {}
        self._roster = roster
        # What any model on the roster is known to lack, so that a request needing none of
        # it (most of them) is not checked model by model.
        known = [group.capabilities for group in roster.groups]
        self._no_vision = any(c.vision is False for c in known)
        self._no_tools = any(c.tools is False for c in known)
        self._windows = sorted({c.context_window for c in known if c.context_window is not None})
        self._smallest_window = self._windows[0] if self._windows else None
        # A schema-taking model and one a forced tool stands in for serve any structured need.
        self._structured_limited = any(
            c.structured in (Structured.JSON, Structured.NONE) for c in known
        )
        self._by_needs: dict[tuple[object, ...], Groups] = {}

    def may_turn_away(self, needs: RequestNeeds) -> bool:
        """True when some model on the roster may lack what `needs` asks for."""
        return (
            (needs.vision and self._no_vision)
            or (needs.tools and self._no_tools)
            or (self._smallest_window is not None and needs.prompt_tokens > self._smallest_window)
            or (needs.structured is not None and self._structured_limited)
        )

    def able(self, category: object, needs: RequestNeeds) -> Groups:
        """The groups serving `category` whose model can serve `needs`, and the skips of the
        rest. Kept per kind of need: a prompt's size matters only by the windows it exceeds."""
        exceeded = bisect_left(self._windows, needs.prompt_tokens)
        key = (category, needs.vision, needs.tools, needs.structured, exceeded)
        found = self._by_needs.get(key)
        if found is None:
            kept: list[tuple[int, ModelGroup]] = []
            skipped: list[Skip] = []
            for order, group in self.groups(category).served:
                verdict = capability_verdict(group.model, group.capabilities, needs)
                if verdict.reason is None:
                    kept.append((order, group))
                else:
                    where = f"{group.provider}/{group.model}"
                    skipped.append(Skip(verdict.reason, verdict.detail, model=where))
            found = self._by_needs[key] = Groups(tuple(kept), tuple(skipped))
        return found

    @staticmethod
    def of(snapshot: Snapshot) -> LadderIndex:
        """The index of the snapshot's roster, built on first use."""
        index = snapshot.roster.derived.get(LadderIndex)
        if not isinstance(index, LadderIndex):
            index = LadderIndex(snapshot)
            snapshot.roster.derived[LadderIndex] = index
        return index

    def groups(self, category: object) -> Groups:
        """The groups that serve `category` (with their roster order), and the skips of the rest."""
        found = self._by_category.get(category)
        if found is None:
            kept: list[tuple[int, ModelGroup]] = []
            skipped: list[Skip] = []
            for order, group in enumerate(self._roster.groups):
                if category is None or category in group.categories:
                    kept.append((order, group))
                else:
                    detail = f"{group.model} is not listed for {category}"
                    where = f"{group.provider}/{group.model}"
                    skipped.append(Skip(SkipReason.CATEGORY_MISMATCH, detail, model=where))
            found = Groups(tuple(kept), tuple(skipped))
            self._by_category[category] = found
        return found


def connection_skip(
    verdict: Verdict, connection: RosterConnection, model: str | None = None
) -> Skip:
    """A connection's failed verdict as a skip, on the subscription rung for a plan."""
    assert verdict.reason is not None
    rung = Rung.SUBSCRIPTION if connection.billing.billing is BillingClass.SUBSCRIPTION else None
    return Skip(verdict.reason, verdict.detail, connection.id, model, rung, verdict.resets_at)
