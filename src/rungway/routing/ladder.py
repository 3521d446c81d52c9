"""`plan_route`: the ladder as a plain function over a frozen snapshot and a given instant.

`auto/subscription` (fail closed) keeps only plan connections that are verified usable:
subscription billing, a hard-stop overage, fresh quota readings above the cut-off, no
cooldown and a closed breaker. `auto/thrifty` (fail open) keeps every rung and drops a
connection only on positive evidence: an exhausted window, a cooldown, an open breaker, a
paid rung over budget. Candidates are split per rung, so a candidate's connections all sit
on its rung, and ordered by rung, then by score within the rung.
"""

from __future__ import annotations

from dataclasses import dataclass

from rungway.routing.autoid import AutoSpec, Ladder
from rungway.routing.billing import BillingClass
from rungway.routing.gates import (
    Verdict,
    budget_verdict,
    health_verdict,
    plan_verdict,
    quota_verdict,
)
from rungway.routing.plan import Candidate, RoutePlan, Skip, SkipReason
from rungway.routing.rungs import Rung
from rungway.routing.scoring import Signals, score
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import (
    BreakerState,
    ConnectionState,
    ModelGroup,
    QuotaWindow,
    RosterConnection,
    ServedModel,
    Snapshot,
)

_NO_STATE = ConnectionState()
_HEALTH = {BreakerState.CLOSED: 1.0, BreakerState.HALF_OPEN: 0.5, BreakerState.OPEN: 0.0}
_WAITS = (SkipReason.QUOTA_EXHAUSTED, SkipReason.QUOTA_REENTRY, SkipReason.COOLDOWN)


@dataclass(frozen=True, slots=True)
class RouteRequest:
    """What the ladder needs of a request: the name asked for, its spec and the ingress API."""

    requested: str
    spec: AutoSpec
    api: str


@dataclass(slots=True)
class _Entry:
    rung: Rung
    order: int
    provider: str
    model: str
    connection_ids: list[str]
    signals: Signals


def plan_route(
    request: RouteRequest, settings: LadderSettings, snapshot: Snapshot, now: float
) -> RoutePlan:
    """The ordered candidates for `request`, and every skip with its reason."""
    planner = _Planner(request, settings, snapshot, now)
    planner.admit_connections()
    for order, group in enumerate(snapshot.roster.groups):
        planner.place(order, group)
    return RoutePlan(
        requested=request.requested,
        ladder=request.spec.ladder,
        category=request.spec.category,
        candidates=_rank(planner.entries, request.spec.ladder),
        skipped=tuple(planner.skipped),
        earliest_reset=_earliest_reset(planner.skipped, snapshot),
        subscription_exhausted=_subscription_waits(planner.skipped, snapshot),
    )


class _Planner:
    """The working state of one `plan_route` call."""

    def __init__(
        self, request: RouteRequest, settings: LadderSettings, snapshot: Snapshot, now: float
    ) -> None:
        self.request = request
        self.settings = settings
        self.snapshot = snapshot
        self.now = now
        self.strict = request.spec.ladder is Ladder.SUBSCRIPTION
        self.skipped: list[Skip] = []
        self.entries: list[_Entry] = []
        self._admitted: dict[str, Verdict] = {}
        self._scoped: dict[str, tuple[QuotaWindow, ...]] = {}
        self._account_read: set[str] = set()
        self._rungs: dict[Rung, Verdict] = {}

    def admit_connections(self) -> None:
        """Judge every connection once: API, plan terms, health, account-wide quota."""
        for connection in self.snapshot.roster.connections.values():
            state = self.snapshot.states.get(connection.id, _NO_STATE)
            verdict = _connection_verdict(
                connection, state, self.request, self.settings, self.now, strict=self.strict
            )
            if not verdict.passed:
                self.skipped.append(_skip(verdict, connection))
                continue
            self._admitted[connection.id] = verdict
            model_windows = tuple(w for w in state.windows if w.model is not None)
            if model_windows:
                self._scoped[connection.id] = model_windows
            if len(model_windows) < len(state.windows):
                self._account_read.add(connection.id)

    def place(self, order: int, group: ModelGroup) -> None:
        """Add `group`'s admitted connections as one candidate per rung."""
        category = self.request.spec.category
        categories = group.members[0][1].categories
        if category is not None and category not in categories:
            detail = f"{group.model} is not listed for {category}"
            self.skipped.append(
                Skip(SkipReason.CATEGORY_MISMATCH, detail, model=f"{group.provider}/{group.model}")
            )
            return
        by_rung: dict[Rung, _Entry] = {}
        for connection, served in group.members:
            verdict = self._model_verdict(connection, served)
            if verdict is None or not self._rung_open(served.rung):
                continue
            health = _HEALTH[self.snapshot.states.get(connection.id, _NO_STATE).breaker]
            entry = by_rung.get(served.rung)
            if entry is None:
                fit = 1.0 if category is None else 0.0 if category not in categories else 1.0
                signals = Signals(verdict.headroom, served.input_per_mtok, health, fit)
                entry = _Entry(served.rung, order, group.provider, group.model, [], signals)
                by_rung[served.rung] = entry
                self.entries.append(entry)
            else:
                entry.signals = _merge(entry.signals, verdict.headroom, health)
            entry.connection_ids.append(connection.id)

    def _model_verdict(self, connection: RosterConnection, served: ServedModel) -> Verdict | None:
        verdict = self._admitted.get(connection.id)
        if verdict is None or (self.strict and served.rung is not Rung.SUBSCRIPTION):
            return None
        windows = self._scoped.get(connection.id)
        if windows is None:
            return verdict
        # A model-scoped window (a per-model weekly limit) gates only its model.
        own = [w for w in windows if w.model == served.model]
        if not own and not (self.strict and connection.id not in self._account_read):
            return verdict
        model_verdict = quota_verdict(own, self.settings, self.now, strict=self.strict)
        if not model_verdict.passed:
            self.skipped.append(_skip(model_verdict, connection, served.model))
            return None
        return _tighter(verdict, model_verdict)

    def _rung_open(self, rung: Rung) -> bool:
        if self.strict or not rung.paid:
            return True
        verdict = self._rungs.get(rung)
        if verdict is None:
            verdict = budget_verdict(rung, self.settings, self.snapshot.spend)
            self._rungs[rung] = verdict
            if verdict.reason is not None:
                self.skipped.append(Skip(verdict.reason, verdict.detail, rung=rung))
        return verdict.passed


def _connection_verdict(
    connection: RosterConnection,
    state: ConnectionState,
    request: RouteRequest,
    settings: LadderSettings,
    now: float,
    *,
    strict: bool,
) -> Verdict:
    if connection.api != request.api:
        return Verdict(
            SkipReason.API_MISMATCH,
            f"speaks {connection.api}, the request came in as {request.api}; "
            "translation between APIs is not available yet",
        )
    if strict:
        verdict = plan_verdict(connection.billing)
        if not verdict.passed:
            return verdict
    account = [w for w in state.windows if w.model is None]
    if not account and strict and any(w.model is not None for w in state.windows):
        # Only model-scoped windows were read: each model is judged by its own.
        quota = Verdict()
    else:
        quota = quota_verdict(account, settings, now, strict=strict)
    health = health_verdict(state, now, strict=strict)
    if health.passed:
        return quota
    if (
        health.reason is SkipReason.COOLDOWN
        and quota.reason in _WAITS
        and (quota.resets_at or 0) > (health.resets_at or 0)
    ):
        # Usable again only when both are over: report the one that ends later.
        return quota
    return health


def _skip(verdict: Verdict, connection: RosterConnection, model: str | None = None) -> Skip:
    assert verdict.reason is not None
    rung = Rung.SUBSCRIPTION if connection.billing.billing is BillingClass.SUBSCRIPTION else None
    return Skip(verdict.reason, verdict.detail, connection.id, model, rung, verdict.resets_at)


def _tighter(account: Verdict, model: Verdict) -> Verdict:
    if model.headroom is None:
        return account
    if account.headroom is None or model.headroom < account.headroom:
        return model
    return account


def _merge(signals: Signals, headroom: float | None, health: float) -> Signals:
    best = signals.headroom
    if headroom is not None and (best is None or headroom > best):
        best = headroom
    return Signals(best, signals.price, max(signals.health, health), signals.fit)


def _rank(entries: list[_Entry], ladder: Ladder) -> tuple[Candidate, ...]:
    prices: dict[Rung, tuple[float, float]] = {}
    for entry in entries:
        price = entry.signals.price
        if price is not None:
            low, high = prices.get(entry.rung, (price, price))
            prices[entry.rung] = (min(low, price), max(high, price))
    scored = [
        (
            entry,
            score(entry.signals, *prices.get(entry.rung, (0.0, 0.0)), ladder, paid=entry.rung.paid),
        )
        for entry in entries
    ]
    scored.sort(key=lambda pair: (pair[0].rung, -pair[1], pair[0].order))
    return tuple(
        Candidate(entry.provider, entry.model, entry.rung, tuple(entry.connection_ids), value)
        for entry, value in scored
    )


def _subscription_waits(skipped: list[Skip], snapshot: Snapshot) -> bool:
    return any(skip.reason in _WAITS and _is_plan(skip.connection_id, snapshot) for skip in skipped)


def _earliest_reset(skipped: list[Skip], snapshot: Snapshot) -> float | None:
    resets = [
        skip.resets_at
        for skip in skipped
        if skip.reason in _WAITS
        and skip.resets_at is not None
        and _is_plan(skip.connection_id, snapshot)
    ]
    return min(resets) if resets else None


def _is_plan(connection_id: str | None, snapshot: Snapshot) -> bool:
    connection = snapshot.roster.connections.get(connection_id or "")
    return connection is not None and connection.billing.billing is BillingClass.SUBSCRIPTION
