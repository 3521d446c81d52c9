"""Billing classes of connections, from the curated catalog; never from `auth` alone.

Resolution order: no credential (`auth: none`) -> keyless; an entry matching provider and
auth; a provider-wide entry; otherwise `unknown`, which counts as metered everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # terms.py names skip reasons, whose module imports this one.
    from rungway.routing.terms import PlanTerms


class BillingClass(StrEnum):
    """How a connection is paid for."""

    SUBSCRIPTION = "subscription"
    METERED = "metered"
    KEYLESS = "keyless"
    UNKNOWN = "unknown"


class Overage(StrEnum):
    """What happens past a plan's quota."""

    HARD_STOP = "hard-stop"
    METERS_TO_PAID = "meters-to-paid"
    UNKNOWN = "unknown"


LIVE = "live"
"""Catalog overage value: read the connection's live `overage_permitted` flag."""


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One curated fact: (provider, auth) or provider-wide, with its justification."""

    provider: str
    auth: str | None
    billing: BillingClass
    overage: Overage | str
    reason: str
    source: str = "built-in"
    terms: PlanTerms | None = None
    """Who may use the plan, from its terms page; a plan entry (billing `subscription`)
    always states them."""


@dataclass(frozen=True, slots=True)
class BillingVerdict:
    """A connection's billing class and overage, and which entry decided them."""

    billing: BillingClass
    overage: Overage
    reason: str
    entry: str
    live_overage: bool = False
    """The overage is read from the connection's usage endpoint, not fixed by the terms."""

    def with_overage_permitted(self, permitted: bool | None) -> BillingVerdict:
        """This verdict once the connection's live `overage_permitted` flag is known.

        A `live` entry takes its overage from the flag. Any other subscription that the
        account itself says bills past its quota (Claude's extra usage, Codex credits)
        meters to paid, whatever the catalog claims: live evidence beats static terms. An
        unread flag leaves the catalog's word, and a flag saying no overage never loosens
        a catalog entry.
        """
        if self.live_overage:
            return replace(self, overage=_overage(LIVE, permitted))
        if (
            permitted
            and self.billing is BillingClass.SUBSCRIPTION
            and self.overage is not Overage.METERS_TO_PAID
        ):
            entry = f"the account's live overage flag, over {self.entry}"
            return replace(self, overage=Overage.METERS_TO_PAID, entry=entry)
        return self

    @property
    def costs_nothing_extra(self) -> bool:
        """Requests cost nothing extra while quota lasts."""
        return self.billing in (BillingClass.SUBSCRIPTION, BillingClass.KEYLESS)


KEYLESS = BillingVerdict(
    BillingClass.KEYLESS, Overage.HARD_STOP, "no credential: nothing can be billed", "auth none"
)


class Catalog:
    """The entries in force, in tiers by source: operator entries, then the built-in ones.

    A tier that covers the provider decides, auth-specific entry first, then provider-wide,
    so an operator's provider-wide entry overrides every built-in entry of that provider.
    """

    def __init__(self, entries: Iterable[CatalogEntry]) -> None:
        self.entries = tuple(entries)
        sources = dict.fromkeys(entry.source for entry in self.entries)
        self._tiers = [
            tuple(entry for entry in self.entries if entry.source == source) for source in sources
        ]

    def classify(
        self, provider: str, auth: str, overage_permitted: bool | None = None
    ) -> BillingVerdict:
        """The verdict for a connection of `provider` with `auth`."""
        if auth == "none":
            return KEYLESS
        entry: CatalogEntry | None = None
        for tier in self._tiers:
            of_provider = [e for e in tier if e.provider == provider]
            entry = next((e for e in of_provider if e.auth == auth), None) or next(
                (e for e in of_provider if e.auth is None), None
            )
            if entry is not None:
                break
        if entry is None:
            return BillingVerdict(
                BillingClass.UNKNOWN,
                Overage.UNKNOWN,
                f"no catalog entry for {provider}+{auth}: assumed metered",
                "none",
            )
        label = f"{entry.source} {entry.provider}" + (f"+{entry.auth}" if entry.auth else "")
        return BillingVerdict(
            entry.billing,
            _overage(entry.overage, overage_permitted),
            entry.reason,
            label,
            live_overage=entry.overage == LIVE,
        )

    def terms(self, provider: str, auth: str) -> PlanTerms | None:
        """The terms of a `provider` connection with `auth`: from the first entry, in tier
        order, that states terms for it (auth-specific first). An operator's billing entry
        changes a plan's billing, never its terms: only `clients: any` widens them."""
        for tier in self._tiers:
            of_provider = [e for e in tier if e.provider == provider and e.terms is not None]
            entry = next((e for e in of_provider if e.auth == auth), None) or next(
                (e for e in of_provider if e.auth is None), None
            )
            if entry is not None:
                return entry.terms
        return None


def _overage(rule: Overage | str, overage_permitted: bool | None) -> Overage:
    if rule != LIVE:
        return Overage(rule)
    if overage_permitted is None:
        return Overage.UNKNOWN
    return Overage.METERS_TO_PAID if overage_permitted else Overage.HARD_STOP
