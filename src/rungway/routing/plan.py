"""A route plan: the ordered candidates for one request, and every skip with its reason."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

from rungway.routing.autoid import Category, Ladder
from rungway.routing.rungs import Rung


class SkipReason(StrEnum):
    """Why a connection (or a model, or a whole rung) was left out of a plan."""

    CATEGORY_MISMATCH = "category_mismatch"
    NOT_SUBSCRIPTION = "not_subscription"
    OVERAGE_NOT_HARD_STOP = "overage_not_hard_stop"
    QUOTA_MISSING = "quota_missing"
    QUOTA_STALE = "quota_stale"
    QUOTA_UNKNOWN = "quota_unknown"
    QUOTA_EXHAUSTED = "quota_exhausted"
    QUOTA_REENTRY = "quota_below_reentry"
    COOLDOWN = "cooldown"
    BREAKER_OPEN = "breaker_open"
    BREAKER_HALF_OPEN = "breaker_half_open"
    BUDGET_DISABLED = "budget_disabled"
    BUDGET_EXHAUSTED = "budget_exhausted"
    UNPRICED = "unpriced"
    DISABLED = "disabled"
    NO_VISION = "no_vision"
    NO_TOOL_USE = "no_tool_use"
    CONTEXT_TOO_SMALL = "context_too_small"
    NO_STRUCTURED_OUTPUT = "no_structured_output"
    TERMS = "terms"
    """The plan's terms do not allow the request's client (`routing/terms.py`)."""
    CLIENT_KEY = "client_key"
    """The connection is bound to another client key (its `client_key:`)."""


class Skip(NamedTuple):
    """One exclusion. No connection means a rung or a model; no model means every model."""

    reason: SkipReason
    detail: str
    connection_id: str | None = None
    model: str | None = None
    rung: Rung | None = None
    resets_at: float | None = None


class Candidate(NamedTuple):
    """A (provider, model) on one rung, with exactly the connections allowed to serve it.

    Named tuples rather than dataclasses: a plan builds hundreds per request, and a tuple
    is built in C.
    """

    provider: str
    model: str
    rung: Rung
    connection_ids: tuple[str, ...]
    score: float = 0.0


@dataclass(frozen=True, slots=True)
class RoutePlan:
    """Where one request may go, in order, and why everything else was left out."""

    requested: str
    ladder: Ladder | None
    category: Category | None
    candidates: tuple[Candidate, ...]
    skipped: tuple[Skip, ...]
    earliest_reset: float | None = None
    subscription_exhausted: bool = False
    pinned: str | None = None
    """The session's pinned connection when it was usable, so first within its pool."""

    def to_json(self) -> dict[str, Any]:
        """A plain-data form for the ledger, `explain` and the admin API."""
        return {
            "requested": self.requested,
            "ladder": self.ladder.value if self.ladder else None,
            "category": self.category.value if self.category else None,
            "candidates": [
                {
                    "provider": c.provider,
                    "model": c.model,
                    "rung": c.rung.label,
                    "connections": list(c.connection_ids),
                    "score": round(c.score, 4),
                }
                for c in self.candidates
            ],
            "skipped": [
                {
                    "reason": s.reason.value,
                    "detail": s.detail,
                    "connection": s.connection_id,
                    "model": s.model,
                    "rung": s.rung.label if s.rung is not None else None,
                    "resets_at": s.resets_at,
                }
                for s in self.skipped
            ],
            "earliest_reset": self.earliest_reset,
            "pinned": self.pinned,
        }
