"""Where the served ladder could put each request, and what each place would cost.

The oracle chooses among exactly the places the gateway itself could use: a named model
goes to the connections that serve it (as `routing/resolve.py` resolves the name), an
`auto` id to the candidates the real `plan_route` gives with every plan fresh and no money
spent yet. A candidate connection with simulated quota (`World.plans`) is a *plan*; every
other is a *fallback*, priced as the ledger prices it:

- a keyless or free rung costs 0 (its list price is still kept, as the ledger keeps it);
- a subscription connection with no simulated quota costs 0: nothing here limits it;
- a paid rung costs the request's list price at that model, through `World.prices` (the
  config's `prices:` over the list), and an unpriced model 0, as the ledger records it.

Budgets, as the oracle reads them: a rung closed by a budget of 0 (the premium rung by
default) stays closed, as `plan_route` closes it; how much of an open budget is left is not
modelled (spend starts at nothing and stays there), and neither are client keys' budgets.
So the oracle never refuses a request a budget would have refused on its way up the
ladder; a policy that did refuse one paid nothing for it, and its budget refusals are in
its own metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rungway.app import build_roster
from rungway.pricing import Rates, TokenCounts
from rungway.routing.autoid import BadAutoId
from rungway.routing.ladder import RouteRequest, plan_route
from rungway.routing.resolve import ConnectionFacts, ModelTable, UnknownModel
from rungway.routing.rungs import Rung
from rungway.routing.snapshot import ConnectionState, QuotaWindow, Roster, Snapshot
from rungway.whatif.outcome import World
from rungway.whatif.trace import Trace, TraceRequest

_BATCH = 10_000
"""Requests between two progress reports."""


@dataclass(frozen=True, slots=True)
class Choice:
    """One connection a request may go to, with the model it serves there and its prices."""

    connection_id: str
    model: str
    rung: Rung
    cost_usd: float
    """What the request pays there: 0 on a plan, keyless, free or unlimited connection."""
    list_cost_usd: float
    """Its list price at that model (0 when the model has none)."""


@dataclass(frozen=True, slots=True)
class Menu:
    """Where one request may go: its plans, its cheapest fallback, or why it goes nowhere."""

    plans: tuple[Choice, ...]
    fallback: Choice | None
    refusal: str | None = None
    """Why no connection could take it at all (an unknown model, an empty ladder)."""


@dataclass(frozen=True, slots=True)
class _Route:
    """The places a (model name, API) may go, before any request's tokens are priced."""

    plans: tuple[tuple[str, str, Rung], ...]
    fallbacks: tuple[tuple[str, str, Rung], ...]
    refusal: str | None = None


def menus(trace: Trace, world: World, progress: Callable[[int], None]) -> list[Menu]:
    """Each request's menu, in trace order, calling `progress` every few thousand requests."""
    pricer = _Pricer(world)
    routes: dict[tuple[str, str], _Route] = {}
    found: list[Menu] = []
    for position, request in enumerate(trace):
        key = (request.model, request.api)
        route = routes.get(key)
        if route is None:
            route = routes[key] = pricer.route(request.model, request.api)
        found.append(pricer.menu(route, request))
        if (position + 1) % _BATCH == 0:
            progress(_BATCH)
    if len(trace) % _BATCH:
        progress(len(trace) % _BATCH)
    return found


class _Pricer:
    """The roster, the name table and the prices of one world, built once per run."""

    def __init__(self, world: World) -> None:
        settings = world.settings
        self.world = world
        self.roster: Roster = build_roster(settings)
        self.table = ModelTable(
            (ConnectionFacts(c.id, c.provider, frozenset(c.models)) for c in settings.connections),
            settings.aliases,
        )
        self._rates: dict[tuple[str, str], Rates | None] = {}
        self.per_model = {
            connection_id: any(window.model is not None for window in quota.windows)
            for connection_id, quota in world.plans.items()
        }
        self.rungs = {
            (connection.id, served.model): served.rung
            for connection in self.roster.connections.values()
            for served in connection.models
        }
        # Every subscription connection reads fresh and empty, so `auto/subscription`
        # (which needs a verified reading) admits them as `auto/thrifty` does.
        fresh = ConnectionState(windows=(QuotaWindow("oracle", 0.0, None, checked_at=0.0),))
        self.snapshot = Snapshot(
            self.roster,
            {
                connection.id: fresh
                for connection in self.roster.connections.values()
                if any(served.rung is Rung.SUBSCRIPTION for served in connection.models)
            },
        )

    def route(self, model: str, api: str) -> _Route:
        """The plans and fallbacks the served ladder could use for `model` over `api`."""
        try:
            resolution = self.table.resolve(model)
        except (UnknownModel, BadAutoId) as error:
            return _Route((), (), f"no_route: {error}")
        places: list[tuple[str, str, Rung]]
        if resolution.auto is None:
            places = [
                (target.connection_id, target.model, self.rungs[target.connection_id, target.model])
                for target in resolution.targets
            ]
        else:
            request = RouteRequest(resolution.requested, resolution.auto, api)
            plan = plan_route(request, self.world.settings.ladder, self.snapshot, 0.0)
            places = [
                (connection_id, candidate.model, candidate.rung)
                for candidate in plan.candidates
                for connection_id in candidate.connection_ids
            ]
        if not places:
            return _Route((), (), f"no_route: the ladder has no candidate for {model!r}")
        plans = tuple(place for place in places if place[0] in self.world.plans)
        fallbacks = tuple(place for place in places if place[0] not in self.world.plans)
        return _Route(plans, fallbacks)

    def menu(self, route: _Route, request: TraceRequest) -> Menu:
        """`route` priced for `request`'s tokens: every plan, and the cheapest fallback."""
        if route.refusal is not None:
            return Menu((), None, route.refusal)
        tokens = TokenCounts(
            request.input_tokens,
            request.output_tokens,
            request.cache_read_tokens,
            request.cache_write_tokens,
        )
        plans = [self.choice(place, tokens, paid=False) for place in route.plans]
        if len(plans) > 1:
            plans = self._undominated(plans)
        return Menu(
            tuple(plans), _cheapest(self.choice(place, tokens) for place in route.fallbacks)
        )

    def _undominated(self, plans: list[Choice]) -> list[Choice]:
        """One choice per plan connection (its lowest list price), unless it has per-model
        windows.

        Without per-model windows the models a plan serves a request by save the same, and
        count in the same windows: alike in a request or token window, the cheapest the
        least in a cost window. Any share on a dearer model can move to the cheapest with
        nothing lost, so the others are left out of the LP. A per-model window makes them
        differ, and all are kept."""
        kept: dict[str, Choice] = {}
        every: list[Choice] = []
        for choice in plans:
            if self.per_model[choice.connection_id]:
                every.append(choice)
                continue
            held = kept.get(choice.connection_id)
            if held is None or choice.list_cost_usd < held.list_cost_usd:
                kept[choice.connection_id] = choice
        return [*kept.values(), *every]

    def choice(
        self, place: tuple[str, str, Rung], tokens: TokenCounts, *, paid: bool = True
    ) -> Choice:
        """The prices of `tokens` at `place`; `paid` False for a plan, which costs nothing."""
        connection_id, model, rung = place
        provider = self.roster.connections[connection_id].provider
        key = (provider, model)
        if key not in self._rates:
            self._rates[key] = self.world.prices.rates(provider, model)
        rates = self._rates[key]
        list_cost = rates.cost(tokens) if rates is not None else 0.0
        pays = paid and rung.paid
        return Choice(connection_id, model, rung, list_cost if pays else 0.0, list_cost)


def _cheapest(choices: Iterable[Choice]) -> Choice | None:
    """The cheapest choice, the lower rung first among equals (the ladder's order)."""
    return min(choices, key=lambda choice: (choice.cost_usd, choice.rung), default=None)
