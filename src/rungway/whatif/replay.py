"""The gateway's request path replayed on a virtual clock, one trace request at a time.

Nothing is re-implemented: each request is planned by the served `Planner` (named models,
aliases, the ladder's `plan_route`, the state gates), over the roster `build_roster`
makes from the same config file as `serve`, and its routes are walked in order as the
engine walks them:

- a connection whose quota ran out for every model earlier in the walk is passed over;
- a paid rung first holds the request's cost against the rung's and the client key's
  budgets (the real `LocalBudget`, kept in memory); one that does not fit goes on up;
- a plan connection admits the request when its simulated windows (`Allowance`) have
  room, answering with the headers its provider's simulated upstream sends; otherwise it
  answers with that upstream's 429. Either answer is read by the engine's `AnswerReader`
  through the connection's real adapter, so the quota board learns exactly what it learns
  when served: windows and their exhaustion memory, the failure path and its cooldown
  clamped to the reset;
- any other connection serves every request (no simulated quota) without quota headers.

The first route that serves is the request's placement: what was paid (nothing on the
plan, a keyless or a free rung) and its list price, both priced by the ledger's rules.

Decided where the issue is silent:
- A budget hold is the request's real cost, not a worst case from `max_tokens` (a trace
  has no `max_tokens`): a replay knows the real cost before it holds.
- The usage poller's background polls are not replayed. A fail-closed `auto/subscription`
  request that finds a plan without a fresh reading (the poller's own rule) gets the
  reading the plan's usage endpoint would give: its windows now.
- A client key's requests-per-minute limit is not replayed: a trace holds what was sent.
- What a request needs of a model is read from a minimal body of its API: a trace records
  no images, tools or response schema, and its prompt's size skips no model for its
  context window.
- A request refused by every route is placed nowhere; its list price is that of the first
  route it had, or 0 when it had none.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, TypeVar

import orjson

from rungway.adapters.base import Connection
from rungway.adapters.registry import provider_entry
from rungway.app import build_roster
from rungway.budget.local import KeyBudget, LocalBudget, Reservation, Shortfall
from rungway.clock import FakeClock
from rungway.engine.answers import AnswerReader
from rungway.engine.call import Call, Refusal
from rungway.engine.pins import PinStore
from rungway.engine.planning import LadderInputs, Plan, Planner, Route
from rungway.engine.spending import PAID_RUNGS, price
from rungway.engine.state import QuotaObserver, StateSource
from rungway.protocol.api import Api
from rungway.protocol.sessions import SESSION_HEADER
from rungway.protocol.usage import ReportedUsage
from rungway.quota.board import QuotaBoard
from rungway.quota.poller import UsagePoller
from rungway.routing.billing import BillingClass
from rungway.routing.resolve import ConnectionFacts, ModelTable
from rungway.routing.snapshot import QuotaWindow, WindowStatus
from rungway.whatif.allowance import Allowance
from rungway.whatif.outcome import Placement, WindowUse, World
from rungway.whatif.trace import TraceRequest
from rungway.whatif.upstream import SimulatedUpstream

__all__ = ["ReplayGateway", "RouteFilter", "subscription_ids"]

_T = TypeVar("_T")
_NO_HEADERS: Mapping[str, str] = {}
RouteFilter = Callable[[Route, float], bool]
"""Whether a policy lets a request try `route` at an instant (all do, but the baselines)."""

_BODIES: dict[Api, dict[str, Any]] = {
    Api.ANTHROPIC_MESSAGES: {"max_tokens": 1024, "messages": [{"role": "user", "content": "."}]},
    Api.OPENAI_CHAT: {"messages": [{"role": "user", "content": "."}]},
    Api.OPENAI_RESPONSES: {"input": "."},
    Api.GEMINI: {"contents": [{"role": "user", "parts": [{"text": "."}]}]},
}


def run_now(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """The result of a coroutine that never suspends (the planner and the local budget
    await nothing that waits), without an event loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise RuntimeError("a replayed step waited on I/O")


def subscription_ids(world: World) -> frozenset[str]:
    """The connections the billing catalog puts on the plan rung."""
    roster = build_roster(world.settings)
    return frozenset(
        c.id for c in roster.connections.values() if c.billing.billing is BillingClass.SUBSCRIPTION
    )


async def _no_fetch(url: str, headers: Mapping[str, str], body: bytes | None) -> Any:
    raise RuntimeError("a replay fetches nothing")


class _Verifier:
    """A fail-closed decision's check: an unread plan is read as its usage endpoint says."""

    def __init__(self, gateway: ReplayGateway) -> None:
        self._gateway = gateway

    async def verify(self, connection_ids: Iterable[str]) -> None:
        """Give each plan without a reading its windows' state now."""
        self._gateway.read_usage(connection_ids)


class ReplayGateway:
    """One policy's gateway: the planner, the budgets and the plans' simulated quota."""

    def __init__(
        self,
        world: World,
        *,
        board: QuotaBoard | None = None,
        state: StateSource | None = None,
        observer: QuotaObserver | None = None,
        route_filter: RouteFilter | None = None,
        start: float = 0.0,
        pins: PinStore | None = None,
    ) -> None:
        """`pins` keeps sessions' pins (the config's `session_affinity`): each request then
        carries its trace session as Claude Code's session header, and the planner puts
        its pinned account first within its pool."""
        settings = world.settings
        self.world = world
        self.clock = FakeClock(start)
        self.board = board or QuotaBoard(settings.ladder)
        self._state: StateSource = state or self.board
        self._observer: QuotaObserver = observer or self.board
        self._answers = AnswerReader(self._observer)
        self._filter = route_filter
        self.budget = LocalBudget(
            settings.ladder,
            lambda since, grouping: {},
            keys=[
                KeyBudget(key.name, key.budget_usd, key.budget_period)
                for key in settings.client_keys
                if key.budget_usd is not None
            ],
        )
        self._connections = {
            config.id: Connection(
                id=config.id,
                provider=config.provider,
                auth=config.auth,
                secret=None,
                base_url=(config.base_url or provider_entry(config.provider).default_base_url)
                or "http://replay.invalid",
                models=frozenset(config.models),
            )
            for config in settings.connections
        }
        roster = build_roster(settings)
        table = ModelTable(
            (ConnectionFacts(c.id, c.provider, c.models) for c in self._connections.values()),
            settings.aliases,
        )
        self.planner = Planner(
            table=table,
            ladder=LadderInputs(
                roster=roster,
                settings=settings.ladder,
                clock=self.clock,
                state=self._state,
                budget=self.budget,
                verifier=_Verifier(self),
                pins=pins,
            ),
            connections=self._connections,
            adapter_for=lambda provider: provider_entry(provider).adapter,
            # A trace does not say which client sent each request: the replay takes each
            # plan's traffic to come from the clients its terms allow.
            judge_terms=False,
        )
        self.allowances: dict[str, Allowance] = {}
        self._upstreams: dict[str, SimulatedUpstream] = {}
        for connection_id, quota in world.plans.items():
            connection = self._connections.get(connection_id)
            if connection is None:
                continue
            upstream = SimulatedUpstream(connection.provider, quota)
            self._upstreams[connection_id] = upstream
            self.allowances[connection_id] = Allowance(quota, upstream.header_names)
        self._bodies: dict[tuple[str, str], tuple[dict[str, Any], bytes]] = {}
        self._pinning = pins is not None
        self._sessionless = 0
        # Only its rule for a missing or stale reading is used: nothing is fetched.
        self._poller = UsagePoller(self.board, (), _no_fetch, self.clock, settings.ladder)

    def place(self, index: int, request: TraceRequest) -> Placement:
        """Plan `request` at its instant and walk its routes as the engine does."""
        now = request.at
        if now > self.clock.now():
            self.clock.set(now)
        plan = self.plan(request)
        if isinstance(plan, Refusal):
            return Placement(index, None, None, 0.0, 0.0, refusal=plan.code)
        return self.walk(index, request, plan.routes, plan, now)

    def plan(self, request: TraceRequest) -> Plan | Refusal:
        """The served planner's plan for `request` at the clock's reading."""
        return run_now(self.planner.plan(self._call(request)))

    def as_served(self, request: TraceRequest, route: Route, now: float) -> TraceRequest:
        """`request`'s tokens if `route` serves it (as recorded; a pool replay's prompt
        cache changes them)."""
        return request

    def note_served(self, request: TraceRequest, route: Route, now: float) -> None:
        """`route` served `request` (nothing to note here; a pool replay notes its cache)."""

    def walk(
        self, index: int, request: TraceRequest, routes: list[Route], plan: Plan, now: float
    ) -> Placement:
        """Try `routes` in order, as the engine does; the first that serves places `request`."""
        recorded = request
        usage = _usage(request)
        first_list: float | None = None
        refusal = plan.refusal.code if plan.refusal is not None else "no_route"
        spent: set[str] = set()
        for route in routes:
            connection_id = route.connection.id
            if connection_id in spent:
                continue
            if self._filter is not None and not self._filter(route, now):
                continue
            request = self.as_served(recorded, route, now)
            served = usage if request is recorded else _usage(request)
            costs = price(route, served, prices=self.world.prices)
            listed = costs.list_price or 0.0
            if first_list is None:
                first_list = listed
            held: Reservation | None = None
            if route.rung in PAID_RUNGS:
                assert route.rung is not None
                hold = run_now(
                    self.budget.reserve(route.rung, request.client_key, costs.incremental, now)
                )
                if isinstance(hold, Shortfall):
                    refusal = "budget_exhausted"
                    continue
                held = hold
            allowance = self.allowances.get(connection_id)
            if allowance is not None and not self._admitted(route, allowance, request, listed):
                if held is not None:
                    self.budget.release(held)
                self._refuse(route, allowance, spent, now)
                refusal = "quota_exhausted"
                continue
            if held is not None:
                self.budget.settle(held, costs.incremental, now)
            elif costs.incremental and route.rung is not None:
                self.budget.spend(route.rung, request.client_key, costs.incremental, now)
            self._observer.succeeded(connection_id)
            self.note_served(request, route, now)
            rung = int(route.rung) if route.rung is not None else None
            return Placement(index, connection_id, rung, costs.incremental, listed)
        return Placement(index, None, None, 0.0, first_list or 0.0, refusal=refusal)

    def _admitted(
        self, route: Route, allowance: Allowance, request: TraceRequest, listed: float
    ) -> bool:
        now = request.at
        model = route.target.model
        if not allowance.admits(model, now):
            return False
        allowance.charge(model, request, listed, now)
        upstream = self._upstreams[route.connection.id]
        answer = upstream.success(allowance.admission(model, now, admitted=True))
        self._answers.overage(route, answer.headers)
        self._answers.quota(route, answer.headers, now)
        return True

    def _refuse(self, route: Route, allowance: Allowance, spent: set[str], now: float) -> None:
        model = route.target.model
        upstream = self._upstreams[route.connection.id]
        answer = upstream.refusal(model, allowance.admission(model, now, admitted=False))
        self._answers.overage(route, answer.headers)
        windows = self._answers.quota(route, answer.headers, now)
        failure = self._answers.failure(
            route, spent, answer.status, answer.headers, answer.body, now, windows
        )
        if not failure.returns_to_client:
            self._observer.failed(route.connection.id, failure, now)

    def read_usage(self, connection_ids: Iterable[str]) -> None:
        """Note each plan's windows as its usage endpoint reports them, when the poller's
        own rule says it lacks a fresh reading."""
        now = self.clock.now()
        for connection_id in connection_ids:
            allowance = self.allowances.get(connection_id)
            if allowance is None or not self._poller.needs_reading(connection_id, now):
                continue
            readings = allowance.admission("", now, admitted=True).readings
            self.board.observe(
                connection_id,
                [
                    QuotaWindow(
                        reading.spec.name,
                        100.0 * min(1.0, reading.used / reading.capacity),
                        reading.reset_at,
                        now,
                        model=reading.spec.model,
                        status=WindowStatus.REJECTED if reading.spent else WindowStatus.ALLOWED,
                        source="usage",
                    )
                    for reading in readings
                ],
                now,
            )

    def window_use(self) -> tuple[WindowUse, ...]:
        """Every plan window instance that held use, up to the clock's reading."""
        now = self.clock.now()
        return tuple(use for a in self.allowances.values() for use in a.finish(now))

    def _call(self, request: TraceRequest) -> Call:
        key = (request.api, request.model)
        found = self._bodies.get(key)
        if found is None:
            body = {"model": request.model, **_BODIES[Api(request.api)]}
            found = self._bodies[key] = (body, orjson.dumps(body))
        body, raw = found
        return Call(
            request_id="whatif",
            api=Api(request.api),
            body=body,
            raw_body=raw,
            stream=request.stream,
            headers=self._headers(request) if self._pinning else _NO_HEADERS,
            query="",
            client_key=request.client_key,
            started_at=request.at,
            started=0.0,
        )

    def _headers(self, request: TraceRequest) -> Mapping[str, str]:
        session = request.session
        if session is None:
            # Its own session: the replay's bodies are all alike, and the planner's last
            # resort (a hash of the conversation's opening) would make them one.
            self._sessionless += 1
            session = f"whatif-request-{self._sessionless}"
        return {SESSION_HEADER: session}


def _usage(request: TraceRequest) -> ReportedUsage:
    return ReportedUsage(
        request.input_tokens,
        request.output_tokens,
        request.cache_read_tokens,
        request.cache_write_tokens,
        request.reasoning_tokens,
    )
