"""Planning: from a checked request to the routes to try, in order, with the plan behind them.

A named model goes to the connections that serve it (the plan is fixed, so it is built once
per name), less those an operator disabled or that rest (a cooldown, an open breaker). An
`auto` id runs the ladder over a fresh snapshot, with what the request needs of a model
(read once from its parsed body); an empty ladder answers with an error, never a fallback
to another billing class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import orjson

from rungway.adapters.base import Adapter, Connection
from rungway.clock import Clock
from rungway.engine.call import Call, Refusal
from rungway.engine.pins import PinStore
from rungway.engine.state import Budget, QuotaVerifier, StateSource
from rungway.engine.waiting import Gone, ResetWaits
from rungway.protocol.api import Api
from rungway.protocol.clients import recognise_client
from rungway.protocol.sessions import session_key, short_session
from rungway.routing.autoid import BadAutoId, Ladder
from rungway.routing.billing import BillingClass
from rungway.routing.gates import price_verdict
from rungway.routing.ladder import RouteRequest, plan_route
from rungway.routing.named import gate_named
from rungway.routing.needs import request_needs
from rungway.routing.plan import Candidate, RoutePlan, Skip, SkipReason
from rungway.routing.pools import PoolIndex
from rungway.routing.resolve import ModelTable, Resolution, Target, UnknownModel
from rungway.routing.rungs import Rung
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import ConnectionState, Roster, ServedModel, Snapshot
from rungway.routing.terms import RequestClient, TermsGate


@dataclass(frozen=True, slots=True)
class Route:
    """A resolved target with everything needed to call it."""

    target: Target
    connection: Connection
    adapter: Adapter
    rung: Rung | None
    max_output: int | None = None
    """The model's own output limit from the catalog (None when unknown): what a request
    that sets none can cost."""


@dataclass(frozen=True, slots=True)
class Plan:
    """The resolved model, the routes to try in order, and the route plan behind them."""

    resolution: Resolution
    routes: list[Route]
    route_plan: RoutePlan
    route_plan_json: bytes
    """The route plan as the ledger stores it, encoded once."""
    refusal: Refusal | None = None
    """Why a well-formed request goes nowhere (the ladder left nothing, every connection
    rests): no route is tried, and the refusal is recorded with this plan."""
    session: str | None = None
    """The request's session key when session affinity keeps it (`protocol.sessions`): the
    engine pins it to the connection that serves it."""

    @classmethod
    def of(
        cls,
        resolution: Resolution,
        routes: list[Route],
        route_plan: RoutePlan,
        *,
        refusal: Refusal | None = None,
        session: str | None = None,
    ) -> Plan:
        """A plan with its encoded route plan (and its session's short hash, never the key)."""
        data = route_plan.to_json()
        if session is not None:
            data["session"] = short_session(session)
        return cls(resolution, routes, route_plan, orjson.dumps(data), refusal, session)


_NAMED_PLANS_KEPT = 4096
"""Named models' plans are fixed but for the state gates applied per request: kept up to
this many."""
_ENABLED = ConnectionState()


@dataclass(frozen=True, slots=True)
class LadderInputs:
    """What the engine needs to run the ladder: the roster, its settings, time and state."""

    roster: Roster
    settings: LadderSettings
    clock: Clock
    state: StateSource
    budget: Budget
    verifier: QuotaVerifier
    pins: PinStore | None = None
    """Where sessions' pins are kept; None when `settings.session_affinity` is off."""


class Planner:
    """Decides the routes of each request."""

    def __init__(
        self,
        *,
        table: ModelTable,
        ladder: LadderInputs,
        connections: Mapping[str, Connection],
        adapter_for: Callable[[str], Adapter],
        judge_terms: bool = True,
    ) -> None:
        """`judge_terms=False` leaves the plans' terms and bound keys out (a what-if replay,
        whose trace does not say which client sent each request)."""
        self.table = table
        self._ladder = ladder
        self._connections = connections
        self._adapter_for = adapter_for
        self._served: dict[tuple[str, str], ServedModel] = {
            (connection.id, served.model): served
            for connection in ladder.roster.connections.values()
            for served in connection.models
        }
        self._named: dict[str, tuple[Plan, bool]] = {}
        """Each named model's plan, and whether a session's pin could bear on it."""
        plan_ids = PoolIndex.of(ladder.roster).plan_ids
        self._plan_ids = plan_ids
        # Only a plan account is pinned to a session (and only a plan pool ordered by its
        # strategy): with none in the roster, no pin is looked up but a Responses chain's,
        # whose reply pins whichever connection stored it.
        self._any_plans = bool(plan_ids)
        self._shared_pins = ladder.pins is not None and ladder.pins.shared
        self._waits = ResetWaits(ladder.clock, ladder.settings)
        self._terms = TermsGate(ladder.roster.connections.values() if judge_terms else ())
        self._subscription_connections = [
            connection.id
            for connection in ladder.roster.connections.values()
            if connection.billing.billing is BillingClass.SUBSCRIPTION
        ]

    async def plan(self, call: Call, gone: Gone | None = None) -> Plan | Refusal:
        """Where the request may go, or why it cannot go anywhere.

        A request that names no model this gateway knows is refused here; one the ladder
        or the connections' state turn away gets a plan with no routes and its `refusal`,
        so that the engine records it. Given `gone` (returns when the client hangs up), an
        `auto` request may be held for a plan's reset (`waiting.py`), which raises
        `LeftWhileWaiting` if the client hangs up meanwhile."""
        model: str = call.body["model"]
        # Who sent it matters only where a plan's terms or a bound key keep clients off.
        client = (
            RequestClient(recognise_client(call.headers), call.client_key)
            if self._terms.restricts
            else None
        )
        known = self._named.get(model)
        if known is not None:
            named, affine = known
            if not affine and call.api is not Api.OPENAI_RESPONSES:
                return self._without_disabled(named, client)
            return await self._named_gated(call, named, client)
        try:
            resolution = self.table.resolve(model)
        except UnknownModel as error:
            return Refusal(404, str(error), "model_not_found")
        except BadAutoId as error:
            return Refusal(400, str(error), "invalid_auto_id")
        if resolution.auto is not None:
            if resolution.auto.ladder is Ladder.SUBSCRIPTION or self._shared_pins:
                planned = await self._auto_plan(call, resolution, client)
            else:
                # Nothing to wait for (no reading to fetch, no shared pin to ask): planned
                # here, without a coroutine of its own.
                session, pinned, _ = self._session(call)
                planned = self._ladder_plan(call, resolution, client, session, pinned)
            if (
                gone is None
                or isinstance(planned, Refusal)
                or planned.route_plan.earliest_reset is None
            ):
                return planned  # no reset to hold it for: `waiting.py` has nothing to do
            return await self._waits.held(
                planned, gone, lambda: self._auto_plan(call, resolution, client)
            )
        named = self._named_plan(resolution)
        affine = self._affine(named)
        if resolution.exact:
            # A name a glob alias matched is one of endlessly many a client can make up:
            # keeping its plan would let those names fill memory, so it is built each time.
            if len(self._named) >= _NAMED_PLANS_KEPT:
                self._named.clear()
            self._named[model] = (named, affine)
        if not affine and call.api is not Api.OPENAI_RESPONSES:
            return self._without_disabled(named, client)
        return await self._named_gated(call, named, client)

    def _affine(self, named: Plan) -> bool:
        """Whether a session's pin could bear on a named plan: several connections serve
        it, one a plan account (the only kind a session is pinned to, Responses chains
        aside). Without one, its requests need no session key."""
        candidates = named.route_plan.candidates
        return len(candidates) > 1 and any(
            c.connection_ids[0] in self._plan_ids for c in candidates
        )

    async def _named_gated(self, call: Call, named: Plan, client: RequestClient | None) -> Plan:
        """A named plan for this request: gated, and when several connections serve the
        name, its plan accounts' pools ordered with the session's pin first."""
        if len(named.route_plan.candidates) < 2:
            return self._without_disabled(named, client)
        session, pinned, unseen = self._session(call)
        if unseen:
            pinned = await self._recall(session)
        plan = self._without_disabled(named, client, pinned, session)
        if session is not None and plan.session is None:
            # Unchanged, so the plan kept per name: the session rides on a copy of it
            # (built directly: `dataclasses.replace` costs twice as much).
            plan = Plan(
                plan.resolution,
                plan.routes,
                plan.route_plan,
                plan.route_plan_json,
                plan.refusal,
                session,
            )
        return plan

    async def _auto_plan(
        self, call: Call, resolution: Resolution, client: RequestClient | None
    ) -> Plan | Refusal:
        """An `auto` request's plan over a fresh snapshot (after reading plans' usage)."""
        assert resolution.auto is not None
        if resolution.auto.ladder is Ladder.SUBSCRIPTION:
            # Fail closed needs verified readings: fetch the missing ones (and those whose
            # window has reset since) first, not for a disabled plan, which no reading
            # would bring back.
            states = self._ladder.state.connection_states(self._ladder.clock.now())
            await self._ladder.verifier.verify(
                [c for c in self._subscription_connections if not states.get(c, _ENABLED).disabled]
            )
        session, pinned, unseen = self._session(call)
        if unseen:
            pinned = await self._recall(session)
        return self._ladder_plan(call, resolution, client, session, pinned)

    def _without_disabled(
        self,
        named: Plan,
        client: RequestClient | None,
        pinned: str | None = None,
        session: str | None = None,
    ) -> Plan:
        """A named plan less the connections disabled, resting or kept off by their plan's
        terms for this client (most often: unchanged).

        A connection cooling down or behind an open breaker is not asked while another can
        serve; when every one rests, the answer is a 429 until the first comes back."""
        now = self._ladder.clock.now()
        states = self._ladder.state.connection_states(now)
        gated = gate_named(
            named.route_plan,
            states,
            now,
            self._terms.skips(client),
            strategy=self._ladder.settings.pool_strategy,
            pinned=pinned,
            roster=self._ladder.roster,
        )
        if gated is named.route_plan:
            return named
        requested = named.resolution.requested
        if not gated.candidates:
            skipped = gated.skipped
            kept_off = [s for s in skipped if s.reason in (SkipReason.TERMS, SkipReason.CLIENT_KEY)]
            if kept_off and gated.earliest_reset is None:
                reasons = "; ".join(_describe(skip) for skip in skipped[:12])
                message = f"no connection serving {requested} may serve this client: {reasons}"
                refusal = Refusal(403, message, kept_off[0].reason.value)
            elif gated.earliest_reset is None:
                ids = ", ".join(skip.connection_id or "" for skip in skipped)
                message = (
                    f"every connection serving {requested} is disabled ({ids}); "
                    "enable one with `rungway connections enable ID`"
                )
                refusal = Refusal(503, message, "no_route")
            else:
                wait = max(1.0, gated.earliest_reset - now)
                reasons = "; ".join(_describe(skip) for skip in skipped[:12])
                message = (
                    f"every connection serving {requested} is resting: {reasons}; "
                    f"retry after {wait:.0f}s"
                )
                refusal = Refusal(429, message, "connections_resting", retry_after_s=wait)
            return Plan.of(named.resolution, [], gated, refusal=refusal, session=session)
        # In the gated plan's order, which a pool's strategy or a pin may have changed.
        routes_of = {(route.connection.id, route.target.model): route for route in named.routes}
        routes = [routes_of[c.connection_ids[0], c.model] for c in gated.candidates]
        return Plan.of(named.resolution, routes, gated, session=session)

    def _session(self, call: Call) -> tuple[str | None, str | None, bool]:
        """The request's session key, the connection it is pinned to in this process (None,
        None without session affinity), and whether the shared store is to be asked: a pin
        this process knows is one lookup, and the shared store is asked only for a session
        this process has not seen."""
        pins = self._ladder.pins
        if pins is None:
            return None, None, False
        key = session_key(call.api, call.headers, call.body, call.raw_body)
        if key is None:
            return None, None, False
        if not self._any_plans and call.api is not Api.OPENAI_RESPONSES:
            # Nothing here can be pinned to it: the key only labels the ledger's row (what
            # a what-if replay follows a conversation by).
            return key, None, False
        pinned = pins.pinned(key, self._ladder.clock.now())
        return key, pinned, pinned is None and pins.shared

    async def _recall(self, key: str | None) -> str | None:
        """The pin the shared store holds for a session this process has not seen."""
        pins = self._ladder.pins
        assert pins is not None
        assert key is not None
        return await pins.recall(key, self._ladder.clock.now())

    def _ladder_plan(
        self,
        call: Call,
        resolution: Resolution,
        client: RequestClient | None,
        session: str | None = None,
        pinned: str | None = None,
    ) -> Plan | Refusal:
        spec = resolution.auto
        assert spec is not None
        ladder = self._ladder
        now = ladder.clock.now()
        snapshot = Snapshot(
            ladder.roster, ladder.state.connection_states(now), ladder.budget.rung_spend(now)
        )
        needs = request_needs(call.api, call.body, call.raw_body)
        request = RouteRequest(
            resolution.requested, spec, call.api.value, needs, client, pinned=pinned
        )
        route_plan = plan_route(request, ladder.settings, snapshot, now)
        routes = [
            self._route(Target(connection_id, candidate.model), candidate.rung)
            for candidate in route_plan.candidates
            for connection_id in candidate.connection_ids
        ]
        if routes:
            return Plan.of(resolution, routes, route_plan, session=session)
        refusal = _empty_pool(route_plan, spec.ladder, spec.id, now)
        return Plan.of(resolution, [], route_plan, refusal=refusal, session=session)

    def _route(self, target: Target, rung: Rung | None) -> Route:
        connection = self._connections[target.connection_id]
        served = self._served.get((connection.id, target.model))
        limit = served.capabilities.max_output if served is not None else None
        return Route(target, connection, self._adapter_for(connection.provider), rung, limit)

    def _named_plan(self, resolution: Resolution) -> Plan:
        """Every connection that serves a named model, in the configured order, less those
        whose budgeted paid rung cannot price it.

        One that speaks another API than the client's is used through translation."""
        routes: list[Route] = []
        skipped: list[Skip] = []
        for target in resolution.targets:
            served = self._served.get((target.connection_id, target.model))
            route = self._route(target, served.rung if served is not None else None)
            if served is not None:
                priced = served.input_per_mtok is not None
                provider = route.connection.provider
                verdict = price_verdict(
                    served.rung, self._ladder.settings, provider, target.model, priced=priced
                )
                if verdict.reason is not None:
                    skipped.append(
                        Skip(
                            verdict.reason,
                            verdict.detail,
                            target.connection_id,
                            target.model,
                            served.rung,
                        )
                    )
                    continue
            routes.append(route)
        candidates = tuple(
            Candidate(
                route.connection.provider,
                route.target.model,
                route.rung if route.rung is not None else Rung.PREMIUM,
                (route.connection.id,),
            )
            for route in routes
        )
        route_plan = RoutePlan(resolution.requested, None, None, candidates, tuple(skipped))
        if routes:
            return Plan.of(resolution, routes, route_plan)
        reasons = "; ".join(_describe(skip) for skip in skipped[:12])
        message = f"no connection can serve {resolution.requested}: {reasons}"
        return Plan.of(resolution, [], route_plan, refusal=Refusal(503, message, "no_route"))


def _empty_pool(plan: RoutePlan, ladder: Ladder, auto_id: str, now: float) -> Refusal:
    """The answer when the ladder leaves nothing: never a fallback to another billing class."""
    reasons = "; ".join(_describe(skip) for skip in plan.skipped[:12])
    more = f" (and {len(plan.skipped) - 12} more)" if len(plan.skipped) > 12 else ""
    if ladder is not Ladder.SUBSCRIPTION:
        return Refusal(503, f"no connection can serve {auto_id}: {reasons}{more}", "no_route")
    message = f"no plan connection can serve {auto_id} without billing: {reasons}{more}"
    if plan.subscription_exhausted:
        wait = None if plan.earliest_reset is None else max(1.0, plan.earliest_reset - now)
        if wait is not None:
            # Said in the message too: a client told not to retry reads the moment here.
            message += f"; the first plan is usable again in {wait:.0f}s: retry after {wait:.0f}s"
        return Refusal(429, message, "subscription_unavailable", retry_after_s=wait)
    return Refusal(503, message, "subscription_unavailable")


def _describe(skip: Skip) -> str:
    subject = skip.connection_id or skip.model or (skip.rung.label if skip.rung else "?")
    if skip.connection_id and skip.model:
        subject = f"{skip.connection_id} ({skip.model})"
    return f"{subject}: {skip.reason} ({skip.detail})"
