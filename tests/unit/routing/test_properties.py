"""Properties of `plan_route` over random worlds.

A world is a random billing catalog, a roster of connections (providers, auths, APIs,
models, tiers, prices), quota readings (used percent, resets before and after now, ages,
statuses, model scopes, exhaustion memory), the accounts' live overage flags (billing past
the quota permitted, and in use), cooldowns, breakers, disabled connections, budgets,
spend, a clock, each model's capabilities and what the request needs of a model.
Oracles are written out here from the spec, never by calling the gates they check.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from rungway.models.capabilities import ModelCapabilities, Structured
from rungway.pricing import Tier
from rungway.routing.autoid import AutoSpec, Category, Ladder
from rungway.routing.billing import (
    KEYLESS,
    LIVE,
    BillingClass,
    BillingVerdict,
    Catalog,
    CatalogEntry,
    Overage,
)
from rungway.routing.ladder import RouteRequest, plan_route
from rungway.routing.needs import RequestNeeds
from rungway.routing.plan import RoutePlan, SkipReason
from rungway.routing.rungs import Rung, rung_for
from rungway.routing.settings import LadderSettings, RungName
from rungway.routing.snapshot import (
    BreakerState,
    ConnectionState,
    QuotaWindow,
    Roster,
    RosterConnection,
    RungSpend,
    ServedModel,
    Snapshot,
    WindowStatus,
)
from rungway.routing.terms import ConnectionTerms, PlanTerms, RequestClient

from .builders import API, OTHER_API, SYNTHETIC_ENTRIES

PROVIDERS = ("planned", "overflowing", "metered-co", "brand-new", "seat")
AUTHS = ("oauth", "apikey", "none", "cookie")
MODELS = ("m0", "m1", "m2", "fable", "saga")
RUNG_NAMES: tuple[RungName, ...] = ("subscription", "keyless", "free", "cheap", "premium")
EXAMPLES = settings(deadline=None)
CAPABILITY = {
    SkipReason.NO_VISION,
    SkipReason.NO_TOOL_USE,
    SkipReason.CONTEXT_TOO_SMALL,
    SkipReason.NO_STRUCTURED_OUTPUT,
}

capability_sets = st.builds(
    ModelCapabilities,
    vision=st.sampled_from([None, True, False]),
    tools=st.sampled_from([None, True, False]),
    structured=st.sampled_from([None, *Structured]),
    context_window=st.sampled_from([None, 8_000, 64_000, 200_000]),
)
request_needs = st.builds(
    RequestNeeds,
    vision=st.booleans(),
    tools=st.booleans(),
    structured=st.sampled_from([None, None, "json", "schema"]),
    prompt_tokens=st.sampled_from([0, 5_000, 60_000, 150_000, 500_000]),
)

entries = st.builds(
    CatalogEntry,
    provider=st.sampled_from(PROVIDERS),
    auth=st.sampled_from([None, *AUTHS]),
    billing=st.sampled_from(BillingClass),
    overage=st.sampled_from([*Overage, LIVE]),
    reason=st.just("drawn"),
)


@dataclass(frozen=True)
class World:
    """Everything one `plan_route` call looks at."""

    request: RouteRequest
    settings: LadderSettings
    snapshot: Snapshot
    now: float

    def plan(self) -> RoutePlan:
        return plan_route(self.request, self.settings, self.snapshot, self.now)

    @property
    def connections(self) -> list[RosterConnection]:
        return list(self.snapshot.roster.connections.values())

    def wanted(self, connection: RosterConnection, served: ServedModel) -> bool:
        """The request could use this model on this connection, quota and health aside."""
        category = self.request.spec.category
        wanted = category is None or category in served.categories
        return wanted and able(self.request.needs, served.capabilities)


CLIENTS = ("claude-code", "gemini-cli", None)
KEYS = ("me", "colleague", None)
drawn_terms = st.builds(
    PlanTerms,
    page=st.just("https://example.com/terms"),
    read=st.just("2026-12-04"),
    clients=st.one_of(st.none(), st.frozensets(st.sampled_from(CLIENTS[:2]), min_size=1)),
    says=st.just("drawn"),
    one_person=st.booleans(),
    rule=st.just("drawn plans serve drawn clients only"),
)
connection_terms = st.builds(
    ConnectionTerms,
    terms=st.one_of(st.none(), drawn_terms),
    widened=st.booleans(),
    client_key=st.sampled_from(KEYS),
)


@st.composite
def worlds(
    draw: st.DrawFn, *, ladder: Ladder | None = None, telemetry: bool = True, terms: bool = False
) -> World:
    now = float(draw(st.integers(1_700_000_000, 1_900_000_000)))
    # Drawn entries go first, as operator entries do, over the synthetic ones; without the
    # latter almost no world would hold a hard-stop subscription to check.
    catalog = Catalog([*draw(st.lists(entries, max_size=6)), *SYNTHETIC_ENTRIES])

    # Tier and price belong to a (provider, model); categories to a model.
    priced: dict[tuple[str, str], tuple[Tier, float | None]] = {}
    categories = {
        model: draw(st.frozensets(st.sampled_from(Category), min_size=1)) for model in MODELS
    }
    # Mostly unknown, as most models are: a world where every model lacks something would
    # leave nothing to plan.
    capabilities = {
        model: draw(st.one_of(st.just(ModelCapabilities()), capability_sets)) for model in MODELS
    }
    roster = []
    for index in range(draw(st.integers(1, 8))):
        provider = draw(st.sampled_from([*PROVIDERS, *["planned"] * 4]))
        auth = draw(st.sampled_from([*AUTHS, *["oauth"] * 4]))
        permitted = draw(st.sampled_from([None, True, False]))
        billing = catalog.classify(provider, auth, permitted)
        served = []
        for model in draw(st.lists(st.sampled_from(MODELS), min_size=1, max_size=4, unique=True)):
            if (provider, model) not in priced:
                tier = draw(st.sampled_from(Tier))
                priced[provider, model] = (tier, draw(st.sampled_from([None, 0.0, 0.2, 0.8, 3.0])))
            tier, price = priced[provider, model]
            served.append(
                ServedModel(
                    model,
                    rung_for(billing, tier),
                    tier,
                    price,
                    categories[model],
                    capabilities[model],
                )
            )
        api = draw(st.sampled_from([API, API, API, OTHER_API]))
        rules = draw(connection_terms) if terms else ConnectionTerms()
        roster.append(
            RosterConnection(f"c{index}", provider, auth, api, billing, tuple(served), rules)
        )

    states: dict[str, ConnectionState] = {}
    spend: dict[Rung, RungSpend] = {}
    # Without telemetry there are no budgets either: `null` is a paid rung without a limit.
    budgets: dict[RungName, float | None] = {"cheap": None, "premium": None}
    exit_at = draw(st.sampled_from([0.0, 2.0, 5.0]))
    reentry = exit_at + draw(st.sampled_from([0.0, 3.0, 10.0]))
    max_age = draw(st.sampled_from([60.0, 180.0, 300.0]))
    if telemetry:
        for connection in roster:
            if draw(st.integers(0, 9)):
                states[connection.id] = draw(connection_states(now, connection))
        for rung in Rung:
            if draw(st.booleans()):
                spent = draw(st.sampled_from([0.0, 0.5, 2.0, 5.0, 10.0]))
                spend[rung] = RungSpend(spent, draw(st.sampled_from([0.0, 1.0])))
        budgets = draw(
            st.dictionaries(
                st.sampled_from(RUNG_NAMES), st.sampled_from([0.0, 1.0, 5.0, None]), max_size=3
            )
        )
    ladder_settings = LadderSettings(
        exit_cutoff_percent=exit_at,
        reentry_min_remaining_percent=reentry,
        max_state_age_s=max_age,
        rung_budget_usd=budgets,
    )
    spec = AutoSpec(
        ladder or draw(st.sampled_from(Ladder)),
        draw(st.one_of(st.none(), st.none(), st.sampled_from(Category))),
    )
    needs = draw(st.one_of(st.just(RequestNeeds(prompt_tokens=100)), request_needs))
    client = (
        RequestClient(draw(st.sampled_from(CLIENTS)), draw(st.sampled_from(KEYS)))
        if terms
        else None
    )
    request = RouteRequest(spec.id, spec, API, needs, client)
    return World(request, ladder_settings, Snapshot(Roster(roster), states, spend), now)


@st.composite
def connection_states(draw: st.DrawFn, now: float, connection: RosterConnection) -> ConnectionState:
    """Half healthy (usable windows, no cooldown, closed breaker), half anything at all.

    Without the healthy half, almost no world would let the subscription ladder yield a
    connection, and its property would hold vacuously.
    """
    scopes = [None, None, None, *(served.model for served in connection.models), "not-served"]
    # Disabled now and then, healthy ones included: those are the ones only disabling stops.
    disabled = draw(st.integers(0, 5)) == 0
    if draw(st.booleans()):
        count = draw(st.integers(1, 2))
        windows = [draw(healthy_windows(now, scopes)) for _ in range(count)]
        permitted = draw(st.sampled_from([None, False, False, True]))
        in_use = draw(st.booleans())
        return ConnectionState(
            tuple(windows),
            overage_permitted=permitted,
            overage_in_use=bool(permitted) and in_use,
            disabled=disabled,
        )
    count = draw(st.sampled_from([0, 1, 2, 3]))
    windows = [
        draw(st.one_of(healthy_windows(now, scopes), any_windows(now, scopes)))
        for _ in range(count)
    ]
    cooldown = draw(st.sampled_from([None, None, now - 10, now, now + 10, now + 3_600]))
    breaker = draw(st.sampled_from([*BreakerState, BreakerState.CLOSED]))
    permitted = draw(st.sampled_from([None, False, True]))
    in_use = draw(st.booleans())
    return ConnectionState(
        tuple(windows),
        cooldown,
        "drawn",
        breaker,
        overage_permitted=permitted,
        overage_in_use=bool(permitted) and in_use,
        disabled=disabled,
    )


@st.composite
def healthy_windows(draw: st.DrawFn, now: float, scopes: list[str | None]) -> QuotaWindow:
    return QuotaWindow(
        name=draw(st.sampled_from(["5h", "7d", "7d_oi", "month"])),
        used_percent=draw(st.floats(0, 80)),
        resets_at=draw(st.sampled_from([None, now + 3_600])),
        checked_at=now - draw(st.floats(0, 59)),
        model=draw(st.sampled_from(scopes)),
        status=draw(st.sampled_from([WindowStatus.ALLOWED, WindowStatus.WARNING])),
        was_exhausted=draw(st.booleans()),
    )


@st.composite
def any_windows(draw: st.DrawFn, now: float, scopes: list[str | None]) -> QuotaWindow:
    edges = [0.0, 90.0, 95.0, 97.0, 98.0, 99.0, 100.0, 104.0, None]
    ages = [0.0, 59.0, 60.0, 61.0, 180.0, 181.0, 300.0, 301.0]
    offset = draw(st.sampled_from([-3_600.0, -1.0, 0.0, 1.0, 3_600.0]))
    return QuotaWindow(
        name=draw(st.sampled_from(["5h", "7d", "7d_oi", "month"])),
        used_percent=draw(st.one_of(st.sampled_from(edges), st.floats(0, 100))),
        resets_at=draw(st.sampled_from([None, now + offset])),
        checked_at=now - draw(st.one_of(st.sampled_from(ages), st.floats(0, 1_000))),
        model=draw(st.sampled_from(scopes)),
        status=draw(st.sampled_from(WindowStatus)),
        was_exhausted=draw(st.booleans()),
    )


# --- Oracles, written from the spec ----------------------------------------------------------


def applicable(state: ConnectionState, model: str) -> list[QuotaWindow]:
    """Account-wide windows and the ones scoped to `model`."""
    return [w for w in state.windows if w.model is None or w.model == model]


def verified_headroom(w: QuotaWindow, world: World) -> bool:
    """Past its reset (a new window starts unspent, and a hard-stop plan cannot bill), or
    fresh, read as allowed, and above its cut-off (or re-entry)."""
    s, now = world.settings, world.now
    if w.resets_at is not None and w.resets_at <= now:
        return True
    if now - w.checked_at > s.max_state_age_s:
        return False
    if w.status not in (WindowStatus.ALLOWED, WindowStatus.WARNING) or w.used_percent is None:
        return False
    floor = s.reentry_min_remaining_percent if w.was_exhausted else s.exit_cutoff_percent
    return 100.0 - w.used_percent > floor


def evidently_exhausted(w: QuotaWindow, world: World) -> bool:
    """Positive evidence that a window has no room now.

    As the spec reads today, an aged reading is no evidence unless it is a rejection with a
    reset ahead; `test_ladder_cases` holds the strict-xfail cases that question that.
    """
    s, now = world.settings, world.now
    if w.resets_at is not None and w.resets_at <= now:
        return False
    fresh = now - w.checked_at <= s.max_state_age_s
    if w.status is WindowStatus.REJECTED:
        return fresh or w.resets_at is not None
    if not fresh or w.status is WindowStatus.UNKNOWN or w.used_percent is None:
        return False
    floor = s.reentry_min_remaining_percent if w.was_exhausted else s.exit_cutoff_percent
    return 100.0 - w.used_percent <= floor


def able(needs: RequestNeeds, capabilities: ModelCapabilities) -> bool:
    """Nothing the request needs is known to be missing; an unknown capability is there.

    Structured output is served by a schema-taking API or a forced tool standing in; a bare
    JSON mode serves only a request for any JSON object."""
    if needs.vision and capabilities.vision is False:
        return False
    if needs.tools and capabilities.tools is False:
        return False
    window = capabilities.context_window
    if window is not None and needs.prompt_tokens > window:
        return False
    if needs.structured == "schema":
        return capabilities.structured not in (Structured.JSON, Structured.NONE)
    if needs.structured == "json":
        return capabilities.structured is not Structured.NONE
    return True


def cooling_down(state: ConnectionState, now: float) -> bool:
    return state.cooldown_until is not None and state.cooldown_until > now


def serving(world: World, connection_id: str, model: str) -> ServedModel:
    connection = world.snapshot.roster.connections[connection_id]
    return next(served for served in connection.models if served.model == model)


# --- Properties ------------------------------------------------------------------------------


@EXAMPLES
@given(worlds(ladder=Ladder.SUBSCRIPTION))
def test_subscription_yields_only_verified_hard_stop_plan_connections(world: World) -> None:
    for candidate in world.plan().candidates:
        assert candidate.rung is Rung.SUBSCRIPTION
        for connection_id in candidate.connection_ids:
            connection = world.snapshot.roster.connections[connection_id]
            assert connection.billing.billing is BillingClass.SUBSCRIPTION
            state = world.snapshot.states.get(connection_id)
            assert state is not None, "no reading at all"
            # The account's own flag, as last read, outranks the catalog: one that says it
            # bills past its quota (Copilot overage, Claude extra usage, Codex credits) is
            # never yielded; an unread flag leaves a catalog hard-stop standing, except for
            # a live entry, which needs the flag read as no overage.
            assert state.overage_permitted is not True
            if connection.billing.live_overage:
                assert state.overage_permitted is False
            else:
                assert connection.billing.overage is Overage.HARD_STOP
            assert not cooling_down(state, world.now)
            assert state.breaker is BreakerState.CLOSED
            windows = applicable(state, candidate.model)
            assert windows, "no reading that applies to the model"
            assert all(verified_headroom(w, world) for w in windows)


@EXAMPLES
@given(worlds(ladder=Ladder.THRIFTY))
def test_thrifty_never_yields_a_connection_with_evidence_against_it(world: World) -> None:
    for candidate in world.plan().candidates:
        budget = world.settings.budget_for(candidate.rung)
        if candidate.rung.paid and budget is not None:
            used = world.snapshot.spend.get(candidate.rung)
            assert budget > 0
            assert used is None or used.spent_usd + used.reserved_usd < budget
        for connection_id in candidate.connection_ids:
            state = world.snapshot.states.get(connection_id, ConnectionState())
            assert not cooling_down(state, world.now)
            assert state.breaker is not BreakerState.OPEN
            for w in applicable(state, candidate.model):
                assert not evidently_exhausted(w, world), w


@EXAMPLES
@given(worlds())
def test_a_disabled_connection_is_never_a_candidate_and_is_skipped_as_disabled(
    world: World,
) -> None:
    plan = world.plan()
    disabled = {cid for cid, state in world.snapshot.states.items() if state.disabled}
    for candidate in plan.candidates:
        assert not disabled & set(candidate.connection_ids)
    skipped = {s.connection_id for s in plan.skipped if s.reason is SkipReason.DISABLED}
    assert skipped == disabled


@EXAMPLES
@given(worlds())
def test_no_candidate_precedes_a_candidate_of_a_lower_rung(world: World) -> None:
    rungs = [candidate.rung for candidate in world.plan().candidates]
    assert rungs == sorted(rungs)


@EXAMPLES
@given(worlds())
def test_candidates_hold_only_their_own_rungs_serving_connections(world: World) -> None:
    plan = world.plan()
    keys = [(c.provider, c.model, c.rung) for c in plan.candidates]
    assert len(keys) == len(set(keys)), "one candidate per (provider, model, rung)"
    for candidate in plan.candidates:
        assert candidate.connection_ids, "never an empty allowlist"
        assert len(set(candidate.connection_ids)) == len(candidate.connection_ids)
        for connection_id in candidate.connection_ids:
            connection = world.snapshot.roster.connections[connection_id]
            assert connection.provider == candidate.provider
            assert world.wanted(connection, serving(world, connection_id, candidate.model))
            assert serving(world, connection_id, candidate.model).rung is candidate.rung


@EXAMPLES
@given(worlds(ladder=Ladder.THRIFTY, telemetry=False))
def test_thrifty_drops_nothing_when_all_telemetry_is_missing(world: World) -> None:
    plan = world.plan()
    for connection in world.connections:
        for served in connection.models:
            hits = [
                c
                for c in plan.candidates
                if (c.provider, c.model) == (connection.provider, served.model)
                and connection.id in c.connection_ids
            ]
            assert len(hits) == (1 if world.wanted(connection, served) else 0)
    assert {s.reason for s in plan.skipped} <= {SkipReason.CATEGORY_MISMATCH, *CAPABILITY}


@EXAMPLES
@given(worlds())
def test_no_model_without_a_price_is_planned_on_a_budgeted_paid_rung(world: World) -> None:
    # A budget binds only what it can price: a $0 hold would never fill it.
    priced = {
        (connection.provider, served.model, served.rung): served.input_per_mtok is not None
        for connection in world.connections
        for served in connection.models
    }
    for candidate in world.plan().candidates:
        if candidate.rung.paid and world.settings.budget_for(candidate.rung) is not None:
            assert priced[candidate.provider, candidate.model, candidate.rung]


@EXAMPLES
@given(worlds())
def test_every_wanted_connection_is_planned_or_skipped_with_a_reason(world: World) -> None:
    plan = world.plan()
    planned = {
        (c.provider, c.model, connection_id)
        for c in plan.candidates
        for connection_id in c.connection_ids
    }
    for connection in world.connections:
        for served in connection.models:
            if not world.wanted(connection, served):
                continue
            covered = (connection.provider, served.model, connection.id) in planned or any(
                (s.connection_id == connection.id and s.model in (None, served.model))
                or (s.connection_id is None and s.rung is served.rung)
                for s in plan.skipped
            )
            assert covered, (connection.id, served.model)


@EXAMPLES
@given(
    st.lists(entries, max_size=12),
    st.sampled_from(PROVIDERS),
    st.sampled_from(AUTHS),
    st.sampled_from([None, True, False]),
)
def test_catalog_resolution_order(
    catalog_entries: list[CatalogEntry], provider: str, auth: str, permitted: bool | None
) -> None:
    verdict = Catalog(catalog_entries).classify(provider, auth, permitted)
    if auth == "none":
        assert verdict == KEYLESS
        return
    mine = [e for e in catalog_entries if e.provider == provider]
    entry = next((e for e in mine if e.auth == auth), None) or next(
        (e for e in mine if e.auth is None), None
    )
    if entry is None:
        assert (verdict.billing, verdict.overage) == (BillingClass.UNKNOWN, Overage.UNKNOWN)
        return
    if entry.overage == LIVE:
        overage = {None: Overage.UNKNOWN, True: Overage.METERS_TO_PAID}.get(
            permitted, Overage.HARD_STOP
        )
    else:
        overage = Overage(entry.overage)
    assert verdict == BillingVerdict(
        entry.billing, overage, entry.reason, verdict.entry, live_overage=entry.overage == LIVE
    )


@EXAMPLES
@given(worlds())
def test_no_candidate_lacks_a_capability_the_request_needs(world: World) -> None:
    plan = world.plan()
    for candidate in plan.candidates:
        for connection_id in candidate.connection_ids:
            served = serving(world, connection_id, candidate.model)
            assert able(world.request.needs, served.capabilities), (candidate, served)
    # And every model turned away for a capability is one that lacks it.
    for skip in plan.skipped:
        if skip.reason in CAPABILITY:
            assert skip.model is not None
            provider, model = skip.model.split("/", 1)
            lacking = [
                served
                for connection in world.connections
                if connection.provider == provider
                for served in connection.models
                if served.model == model
            ]
            assert lacking
            assert not any(able(world.request.needs, s.capabilities) for s in lacking)


def may_use(connection: RosterConnection, client: RequestClient) -> bool:
    """The spec: a connection bound to a key serves that key alone; one whose plan's terms
    name clients serves those clients alone, unless the operator widened it."""
    rules = connection.terms
    if rules.client_key is not None and client.key != rules.client_key:
        return False
    plan = rules.terms
    return rules.widened or plan is None or plan.clients is None or client.client in plan.clients


@EXAMPLES
@given(worlds(terms=True))
def test_a_request_never_gets_a_connection_its_plans_terms_keep_it_off(world: World) -> None:
    client = world.request.client
    assert client is not None
    plan = world.plan()
    for candidate in plan.candidates:
        for connection_id in candidate.connection_ids:
            connection = world.snapshot.roster.connections[connection_id]
            assert may_use(connection, client), (connection.terms, client)
    # And each one kept off says why, unless the operator disabled it first.
    reasons = {(s.connection_id, s.reason) for s in plan.skipped}
    for connection in world.connections:
        state = world.snapshot.states.get(connection.id)
        if not may_use(connection, client) and not (state is not None and state.disabled):
            assert reasons & {
                (connection.id, SkipReason.TERMS),
                (connection.id, SkipReason.CLIENT_KEY),
            }, connection.id
