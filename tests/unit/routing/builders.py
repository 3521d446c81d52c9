"""Small worlds for routing tests: a synthetic billing catalog, a fixed instant, builders.

The catalog here is never the built-in one, so a change to the curated data cannot move a
ladder test. Providers:

- `planned`: `oauth` is a hard-stop subscription, `apikey` is metered;
- `overflowing`: provider-wide subscription that meters to paid past the quota;
- `metered-co`: provider-wide metered;
- anything else is uncurated, hence `unknown`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from rungway.models.capabilities import UNKNOWN, ModelCapabilities
from rungway.pricing import Tier
from rungway.routing.autoid import Category, parse_auto_id
from rungway.routing.billing import BillingClass, Catalog, CatalogEntry, Overage
from rungway.routing.capabilities import model_categories
from rungway.routing.ladder import RouteRequest, plan_route
from rungway.routing.needs import NO_NEEDS, RequestNeeds
from rungway.routing.plan import RoutePlan, SkipReason
from rungway.routing.rungs import Rung, rung_for
from rungway.routing.settings import LadderSettings
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

NOW = datetime(2026, 8, 22, 12, 0, tzinfo=UTC).timestamp()
API = "openai_chat"
OTHER_API = "anthropic_messages"
DEFAULTS = LadderSettings(rung_budget_usd={"cheap": None, "premium": None})
"""The default tuning without budgets: most cases are about the other gates, and the budget
cases set their own."""

SYNTHETIC_ENTRIES = (
    CatalogEntry(
        "planned", "oauth", BillingClass.SUBSCRIPTION, Overage.HARD_STOP, "plan login", "test"
    ),
    CatalogEntry(
        "planned", "apikey", BillingClass.METERED, Overage.METERS_TO_PAID, "plan's API key", "test"
    ),
    CatalogEntry(
        "overflowing", None, BillingClass.SUBSCRIPTION, Overage.METERS_TO_PAID, "overage", "test"
    ),
    CatalogEntry(
        "metered-co", None, BillingClass.METERED, Overage.METERS_TO_PAID, "per token", "test"
    ),
)
CATALOG = Catalog(SYNTHETIC_ENTRIES)


def connection(
    conn_id: str,
    provider: str = "planned",
    auth: str = "oauth",
    models: Mapping[str, Tier] | Iterable[str] = ("m1",),
    *,
    api: str = API,
    prices: Mapping[str, float] | None = None,
    categories: Mapping[str, frozenset[Category]] | None = None,
    capabilities: Mapping[str, ModelCapabilities] | None = None,
    catalog: Catalog = CATALOG,
    owner: str | None = None,
) -> RosterConnection:
    """A connection classified by `catalog`; a model's rung follows from its billing and tier."""
    billing = catalog.classify(provider, auth)
    tiers = dict(models) if isinstance(models, Mapping) else dict.fromkeys(models, Tier.CHEAP)
    served = tuple(
        ServedModel(
            model,
            rung_for(billing, tier),
            tier,
            (prices or {}).get(model),
            (categories or {}).get(model) or model_categories(model),
            (capabilities or {}).get(model, UNKNOWN),
        )
        for model, tier in tiers.items()
    )
    return RosterConnection(conn_id, provider, auth, api, billing, served, owner=owner)


def window(
    remaining: float | None = 50.0,
    *,
    name: str = "5h",
    resets_in: float | None = None,
    age: float = 1.0,
    model: str | None = None,
    status: WindowStatus = WindowStatus.ALLOWED,
    was_exhausted: bool = False,
    now: float = NOW,
) -> QuotaWindow:
    """A window read `age` seconds before `now`, with `remaining` percent left."""
    return QuotaWindow(
        name=name,
        used_percent=None if remaining is None else 100.0 - remaining,
        resets_at=None if resets_in is None else now + resets_in,
        checked_at=now - age,
        model=model,
        status=status,
        was_exhausted=was_exhausted,
    )


def state(
    *windows: QuotaWindow,
    cooldown_for: float | None = None,
    cooldown_reason: str = "",
    breaker: BreakerState = BreakerState.CLOSED,
    now: float = NOW,
) -> ConnectionState:
    """A connection's state; `cooldown_for` is seconds from `now`."""
    return ConnectionState(
        windows=windows,
        cooldown_until=None if cooldown_for is None else now + cooldown_for,
        cooldown_reason=cooldown_reason,
        breaker=breaker,
    )


FRESH = state(window())
"""The reference default: allowed, 50 % left, no reset, read one second ago."""


def route(
    auto_id: str,
    connections: Iterable[RosterConnection],
    states: Mapping[str, ConnectionState] | None = None,
    *,
    settings: LadderSettings = DEFAULTS,
    spend: Mapping[Rung, RungSpend] | None = None,
    api: str = API,
    now: float = NOW,
    needs: RequestNeeds = NO_NEEDS,
    pinned: str | None = None,
) -> RoutePlan:
    """`plan_route` for `auto_id` over a roster of `connections`."""
    snapshot = Snapshot(Roster(connections), states or {}, spend or {})
    request = RouteRequest(auto_id, parse_auto_id(auto_id), api, needs, pinned=pinned)
    return plan_route(request, settings, snapshot, now)


def order(plan: RoutePlan) -> list[tuple[str, Rung, tuple[str, ...]]]:
    """Each candidate as (model, rung, connection ids), in plan order."""
    return [(c.model, c.rung, c.connection_ids) for c in plan.candidates]


def skip_reasons(plan: RoutePlan, connection_id: str) -> list[SkipReason]:
    """The reasons `connection_id` was skipped, in the order the plan records them."""
    return [skip.reason for skip in plan.skipped if skip.connection_id == connection_id]
