"""`plan_route`: the ladder as a plain function over a frozen snapshot and a given instant.

A connection an operator disabled is never planned, a plan whose terms do not allow the
request's client (or one bound to another client key) is skipped for it, and a model that
lacks what the request needs (vision, tool use, room for the prompt, structured output) is
skipped with the reason.
`auto/subscription` (fail closed) keeps only plan connections that are verified usable:
subscription billing, a hard-stop
overage (the catalog's, unless the account's live flag says it bills past its quota), fresh
quota readings above the cut-off, no cooldown and a closed breaker.
`auto/thrifty` (fail open) keeps every rung and drops a connection only on positive
evidence: an exhausted window, a cooldown, an open breaker, a paid rung over budget. A
model without a price is left off a paid rung that has a budget, which could not bind it.
Candidates are split per rung, so a candidate's connections all sit on its rung, and
ordered by rung, then by score within the rung. Within a candidate, each pool of accounts
is ordered by `ladder.pool_strategy`, the session's pinned connection first
(`routing/pools.py`); that never moves a candidate.

The work is done per connection and per distinct set of connections, not per (connection,
model) pair: the roster shares one id tuple between all groups with the same members.
"""

from __future__ import annotations

from dataclasses import dataclass

from rungway.routing.autoid import AutoSpec, Ladder
from rungway.routing.billing import BillingClass
from rungway.routing.gates import (
    Verdict,
    budget_verdict,
    disabled_verdict,
    health_verdict,
    price_verdict,
    quota_verdict,
    subscription_verdict,
)
from rungway.routing.ladder_index import LadderIndex, connection_skip
from rungway.routing.needs import NO_NEEDS, RequestNeeds
from rungway.routing.plan import Candidate, RoutePlan, Skip, SkipReason
from rungway.routing.pools import decision_order
from rungway.routing.rungs import Rung
from rungway.routing.scoring import WEIGHTS, score
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import (
    BreakerState,
    ConnectionState,
    ModelGroup,
    QuotaWindow,
    RosterConnection,
    Snapshot,
)
from rungway.routing.terms import RequestClient

_NO_STATE = ConnectionState()
_HEALTH = {BreakerState.CLOSED: 1.0, BreakerState.HALF_OPEN: 0.5, BreakerState.OPEN: 0.0}
_WAITS = (SkipReason.QUOTA_EXHAUSTED, SkipReason.QUOTA_REENTRY, SkipReason.COOLDOWN)
_MISSING = Verdict(SkipReason.QUOTA_MISSING, "no quota reading yet")
_PAID = frozenset(rung for rung in Rung if rung.paid)


@dataclass(frozen=True, slots=True)
class RouteRequest:
    """What the ladder needs of a request: the name asked for, its spec, the ingress API and
    what the request needs of a model."""

    requested: str
    spec: AutoSpec
    api: str
    needs: RequestNeeds = NO_NEEDS
    client: RequestClient | None = None
    """Who sent it, for the plans' terms; None leaves the terms out (a what-if replay of
    traffic assumed to come from the clients each plan allows). The gateway always says."""
    pinned: str | None = None
    """The connection the request's session is pinned to (session affinity), if any: it goes
    first within its pool while it is usable."""


def plan_route(
    request: RouteRequest, settings: LadderSettings, snapshot: Snapshot, now: float
) -> RoutePlan:
    """The ordered candidates for `request`, and every skip with its reason."""
    planner = _Planner(request, settings, snapshot, now)
    planner.admit_connections()
    groups = planner.index.groups(request.spec.category)
    planner.skipped.extend(groups.skipped)
    served = groups.served
    if planner.index.may_turn_away(request.needs):
        able = planner.index.able(request.spec.category, request.needs)
        planner.skipped.extend(able.skipped)
        served = able.served
    for order, group in served:
        planner.place(order, group)
    candidates = planner.ranked()
    pinned = request.pinned
    if pinned is not None and not any(pinned in c.connection_ids for c in candidates):
        pinned = None  # not usable now: the strategy alone ordered its pool
    return RoutePlan(
        requested=request.requested,
        ladder=request.spec.ladder,
        category=request.spec.category,
        candidates=candidates,
        skipped=tuple(planner.skipped),
        earliest_reset=_earliest_reset(planner.skipped, snapshot),
        subscription_exhausted=_subscription_waits(planner.skipped, snapshot),
        pinned=pinned,
    )


# The three below are plain tuples, read only by unpacking, never by index. A plan builds
# one per admitted connection, per judged share and per candidate, and a named tuple costs
# eight times as much to build (about 0.25 µs against 0.03 µs) and unpacks more slowly (only
# an exact tuple takes the interpreter's fast path): named, they made `bench/plan_route.py`
# a third slower.

# What one admitted connection brings to a candidate: (quota headroom, health).
_Admitted = tuple[float | None, float]
# A rung share judged for one request: (the connections kept, their best headroom, health).
_Judged = tuple[tuple[str, ...], float | None, float]
# A candidate before scoring: (rung, roster order, provider, model, input price, judged).
_Entry = tuple[Rung, int, str, str, float | None, _Judged]


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
        self._entries: list[_Entry] = []
        self._admitted: dict[str, _Admitted] = {}
        # Per model: connections a model-scoped window blocks, or gives its own headroom.
        self._blocked: dict[str, set[str]] = {}
        self._model_headroom: dict[str, dict[str, float | None]] = {}
        self._shares: dict[int, _Judged] = {}
        self.index = LadderIndex.of(snapshot)
        self._open = self._open_rungs()
        # None (a strategy with no pool of several accounts to order, and no pin) costs
        # nothing per candidate.
        self._pools = decision_order(
            settings.pool_strategy, snapshot.states, now, snapshot.roster, request.pinned
        )

    def _open_rungs(self) -> frozenset[Rung]:
        """Rungs still open after their budgets, noting every rung a budget closes."""
        closed = set()
        if not self.strict:
            for rung in (Rung.CHEAP, Rung.PREMIUM):
                verdict = budget_verdict(rung, self.settings, self.snapshot.spend)
                if verdict.reason is not None:
                    self.skipped.append(Skip(verdict.reason, verdict.detail, rung=rung))
                    closed.add(rung)
        return frozenset(rung for rung in Rung if rung not in closed)

    def admit_connections(self) -> None:
        """Judge every connection once: plan terms, health and quota.

        A connection speaking another API than the request's is judged like any other: the
        engine translates between them."""
        subscription_skips = self.index.subscription_skips if self.strict else {}
        # None (the common case: no plan keeps this client off) costs one test per connection.
        terms_skips = self.index.terms.skips(self.request.client) or None
        states = self.snapshot.states
        for connection in self.snapshot.roster.connections.values():
            state = states.get(connection.id, _NO_STATE)
            if state.disabled:
                # The operator's word comes first: it is the reason they will look for.
                self.skipped.append(connection_skip(disabled_verdict(state), connection))
                continue
            kept_off = terms_skips.get(connection.id) if terms_skips is not None else None
            if kept_off is not None:
                # The plan's terms (or its bound key) rule this client out, however much
                # quota it has left.
                self.skipped.append(kept_off)
                continue
            static = subscription_skips.get(connection.id)
            if static is not None:
                self.skipped.append(static)
                continue
            # A catalog hard-stop plan is judged again when the account's own flag says it
            # bills past its quota (Claude's extra usage, Codex credits).
            if self.strict and (connection.billing.live_overage or state.overage_permitted):
                live = connection.billing.with_overage_permitted(state.overage_permitted)
                terms = subscription_verdict(live)
                if not terms.passed:
                    self.skipped.append(connection_skip(terms, connection))
                    continue
            verdict = _connection_verdict(state, self.settings, self.now, strict=self.strict)
            if not verdict.passed:
                self.skipped.append(connection_skip(verdict, connection))
                continue
            self._admitted[connection.id] = (verdict.headroom, _HEALTH[state.breaker])
            if any(window.model is not None for window in state.windows):
                self._judge_models(connection, state, verdict)

    def _judge_models(
        self, connection: RosterConnection, state: ConnectionState, account: Verdict
    ) -> None:
        # A model-scoped window (a per-model weekly limit) gates only its model. Under the
        # strict ladder a model with no window of its own needs account-wide windows.
        own_windows: dict[str, list[QuotaWindow]] = {}
        account_read = False
        for window in state.windows:
            if window.model is None:
                account_read = True
            else:
                own_windows.setdefault(window.model, []).append(window)
        if self.strict and not account_read:
            # Nothing account-wide was read: a model without a window of its own is unverified.
            for served in connection.models:
                own_windows.setdefault(served.model, [])
        for model, own in own_windows.items():
            verdict = quota_verdict(own, self.settings, self.now, strict=self.strict)
            if not verdict.passed:
                self.skipped.append(connection_skip(verdict, connection, model))
                self._blocked.setdefault(model, set()).add(connection.id)
                continue
            headroom = _lower(account.headroom, verdict.headroom)
            self._model_headroom.setdefault(model, {})[connection.id] = headroom

    def place(self, order: int, group: ModelGroup) -> None:
        """Add `group`'s admitted connections as one candidate per rung."""
        blocked = self._blocked.get(group.model)
        own_headroom = self._model_headroom.get(group.model)
        plain = blocked is None and own_headroom is None
        shares = self._shares
        for share in group.shares:
            rung = share.rung
            if (self.strict and rung is not Rung.SUBSCRIPTION) or rung not in self._open:
                continue
            if share.input_per_mtok is None and rung.paid:
                unpriced = price_verdict(
                    rung, self.settings, group.provider, group.model, priced=False
                )
                if not unpriced.passed:
                    assert unpriced.reason is not None
                    where = f"{group.provider}/{group.model}"
                    self.skipped.append(Skip(unpriced.reason, unpriced.detail, None, where, rung))
                    continue
            ids = share.connection_ids
            if plain:
                # Groups with the same members share one id tuple: judge it once.
                judged = shares.get(id(ids))
                if judged is None:
                    judged = shares[id(ids)] = self._judge_ids(ids, None, None)
            else:
                judged = self._judge_ids(ids, blocked, own_headroom, group.model)
            kept, _, _ = judged
            if kept:
                self._entries.append(
                    (rung, order, group.provider, group.model, share.input_per_mtok, judged)
                )

    def _judge_ids(
        self,
        ids: tuple[str, ...],
        blocked: set[str] | None,
        own_headroom: dict[str, float | None] | None,
        model: str | None = None,
    ) -> _Judged:
        """The connections of `ids` kept, in their pools' order, and their best headroom
        and health. `model` is given when model-scoped windows bear on it."""
        admitted = self._admitted
        kept = [c for c in ids if c in admitted and (blocked is None or c not in blocked)]
        if not kept:
            return (), None, 0.0
        # A candidate is as good as its best connection.
        best_headroom: float | None = None
        best_health = 0.0
        for connection_id in kept:
            headroom, health = admitted[connection_id]
            if own_headroom is not None and connection_id in own_headroom:
                headroom = own_headroom[connection_id]
            if headroom is not None and (best_headroom is None or headroom > best_headroom):
                best_headroom = headroom
            best_health = max(best_health, health)
        ordered = tuple(kept) if len(kept) < len(ids) else ids
        if self._pools is not None and len(ordered) > 1:
            ordered = self._pools.order(ordered, self.request.pinned, model)
        return ordered, best_headroom, best_health

    def ranked(self) -> tuple[Candidate, ...]:
        """The candidates by rung, then by score within the rung, then in roster order."""
        weights = WEIGHTS[self.request.spec.ladder]
        entries = self._entries
        ranges: dict[Rung, tuple[float, float]] = {}
        for rung, _, _, _, price, _ in entries:
            if price is not None and rung in _PAID:
                low, high = ranges.get(rung, (price, price))
                ranges[rung] = (min(low, price), max(high, price))
        # Sort keys: rung, negated score, roster order, then the entry's index.
        keyed = [
            (
                rung,
                -score(headroom, price, health, price_range=ranges.get(rung), weights=weights),
                order,
                at,
            )
            for at, (rung, order, _, _, price, (_, headroom, health)) in enumerate(entries)
        ]
        keyed.sort()
        ranked = []
        for rung, negated, _, at in keyed:
            _, _, provider, model, _, (kept, _, _) = entries[at]
            ranked.append(Candidate(provider, model, rung, kept, -negated))
        return tuple(ranked)


def _connection_verdict(
    state: ConnectionState, settings: LadderSettings, now: float, *, strict: bool
) -> Verdict:
    """Health and quota of an admissible connection: the later of the two waits decides."""
    if not state.windows and state.cooldown_until is None and state.breaker is BreakerState.CLOSED:
        return _MISSING if strict else Verdict()
    account = [w for w in state.windows if w.model is None]
    if not account and strict and state.windows:
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


def _lower(first: float | None, second: float | None) -> float | None:
    if first is None:
        return second
    if second is None:
        return first
    return min(first, second)


def _subscription_waits(skipped: list[Skip], snapshot: Snapshot) -> bool:
    return any(
        skip.reason in _WAITS and _is_subscription(skip.connection_id, snapshot) for skip in skipped
    )


def _earliest_reset(skipped: list[Skip], snapshot: Snapshot) -> float | None:
    resets = [
        skip.resets_at
        for skip in skipped
        if skip.reason in _WAITS
        and skip.resets_at is not None
        and _is_subscription(skip.connection_id, snapshot)
    ]
    return min(resets) if resets else None


def _is_subscription(connection_id: str | None, snapshot: Snapshot) -> bool:
    connection = snapshot.roster.connections.get(connection_id or "")
    return connection is not None and connection.billing.billing is BillingClass.SUBSCRIPTION
