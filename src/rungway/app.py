"""Composition: the one place that knows every concrete class."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterable
from dataclasses import dataclass, replace
from importlib import resources
from typing import TYPE_CHECKING

import yaml
from pydantic import SecretStr

from rungway.adapters.base import Connection, HasUsageEndpoint
from rungway.adapters.registry import provider_entry
from rungway.clock import Clock, SystemClock
from rungway.config import ConfigError, Settings, capability_rows, category_rows
from rungway.credentials.antigravity_project import login_project
from rungway.credentials.code_assist import CodeAssistProject, discover_projects
from rungway.credentials.redaction import install_redaction
from rungway.credentials.secrets import connection_proxy
from rungway.credentials.sources import login_sources
from rungway.dashboard.pages import DashboardPages
from rungway.egress import BadProxy
from rungway.engine.dispatch import Engine
from rungway.engine.pins import MemoryPins, PinStore
from rungway.engine.planning import LadderInputs, Planner
from rungway.engine.record import Recorder
from rungway.engine.state import NoTelemetry, QuotaObserver, QuotaVerifier, StateSource
from rungway.ledger.memory import MemoryLedger
from rungway.ledger.sqlite import SqliteLedger
from rungway.logs.access import AccessLog, AccessSink
from rungway.metrics.collector import StateCollector
from rungway.metrics.endpoint import MetricsEndpoint
from rungway.metrics.recorder import MetricsRecorder
from rungway.metrics.registry import GatewayMetrics
from rungway.metrics.sessions import SessionCollector
from rungway.models.capabilities import model_capabilities
from rungway.pricing import PriceBook, classify_tier
from rungway.pricing.prices import listed_context_window
from rungway.protocol.clients import KNOWN_CLIENTS
from rungway.quota.board import QuotaBoard
from rungway.quota.poller import PollTarget, UsagePoller
from rungway.quota.store import StateStore
from rungway.routing.billing import BillingClass, Catalog, CatalogEntry
from rungway.routing.capabilities import model_categories
from rungway.routing.resolve import ConnectionFacts, ModelTable
from rungway.routing.rungs import rung_for
from rungway.routing.snapshot import Roster, RosterConnection, ServedModel
from rungway.routing.terms import ConnectionTerms, parse_terms
from rungway.server.admin import AdminApi
from rungway.server.app import GatewayApp
from rungway.server.auth import ClientKeys
from rungway.server.rate import RequestRate
from rungway.stores import Stores, open_stores
from rungway.translate.codecs import codec_for
from rungway.transport.http11 import Http11Transport
from rungway.transport.token_client import token_sender

if TYPE_CHECKING:
    # Imported where a cluster is configured: redis and asyncpg cost ~70 ms of every start.
    from rungway.cluster.link import RedisLink
    from rungway.cluster.pins import RedisPins
    from rungway.cluster.polls import RedisPollClaim
    from rungway.cluster.rate import RedisRateWindows
    from rungway.cluster.state import RedisStateStore
    from rungway.ledger.postgres import PostgresLedger


@dataclass(frozen=True, slots=True)
class Gateway:
    """A built gateway: the ASGI app and the ledger it writes to."""

    app: GatewayApp
    ledger: SqliteLedger | MemoryLedger
    quota: QuotaBoard | None
    """The live quota, cooldown and breaker state (None when a test supplies its own)."""
    roster: Roster
    """Which connection serves which model on which rung."""
    link: RedisLink | None = None
    """The cluster's shared Redis (None for a lone gateway with the embedded store)."""
    postgres: PostgresLedger | None = None
    """The cluster's ledger, which `ledger`'s rows drain into (None without `ledger.postgres`)."""
    pins: PinStore | None = None
    """Where sessions are pinned to accounts (None when `ladder.session_affinity` is off)."""


def build_gateway(
    settings: Settings,
    secrets: dict[str, SecretStr],
    *,
    ledger: MemoryLedger | None = None,
    clock: Clock | None = None,
    state: StateSource | None = None,
    access: AccessSink | None = None,
    worker: int = 0,
) -> Gateway:
    """Wire settings and secrets into a ready-to-serve gateway; `access` takes an access
    entry per request (none are made without it); `worker` numbers the process among
    `serve --workers` (each keeps a money journal of its own)."""
    try:
        client = Http11Transport(settings.timeouts)
    except BadProxy as error:
        raise ConfigError(str(error)) from None
    # Each connection's `proxy:` as read; its model calls, token renewals, project lookup
    # and usage reads all go through it.
    proxies = {config.id: connection_proxy(config.id, secrets) for config in settings.connections}
    install_redaction(
        [
            *(secret.get_secret_value() for secret in secrets.values()),
            *client.proxies.passwords(proxies.values()),
        ]
    )
    sources = login_sources(
        settings, clock or SystemClock(), lambda config: token_sender(client, proxies[config.id])
    )
    connections = {
        config.id: Connection(
            id=config.id,
            provider=config.provider,
            auth=config.auth,
            secret=secrets.get(f"connection:{config.id}"),
            base_url=_base_url(config.base_url, config.provider),
            models=frozenset(config.models),
            usage_base_url=config.usage_base_url,
            source=sources.get(config.id),
            project=login_project(
                config.provider,
                _base_url(config.base_url, config.provider),
                sources.get(config.id),
                secrets.get(f"connection:{config.id}"),
                configured=config.project,
                credits=config.credits,
                send=token_sender(client, proxies[config.id]),
            ),
            proxy=proxies[config.id],
        )
        for config in settings.connections
    }
    projects = [c.project for c in connections.values() if isinstance(c.project, CodeAssistProject)]
    table = ModelTable(
        (ConnectionFacts(c.id, c.provider, c.models) for c in connections.values()),
        settings.aliases,
    )
    clock = clock or SystemClock()
    stores = open_stores(settings, secrets, ledger=ledger, clock=clock, worker=worker)
    store, link = stores.ledger, stores.link
    roster = build_roster(settings)
    # The board learns from traffic and from the plans' usage endpoints; a test may
    # instead supply fixed readings as `state`, which then nothing updates.
    quota: _LiveQuota | None = None
    observer: QuotaObserver
    verifier: QuotaVerifier
    if state is None:
        quota = _live_quota(
            settings,
            connections=connections,
            roster=roster,
            stores=stores,
            client=client,
            clock=clock,
        )
        state, observer, verifier = quota.board, quota.board, quota.poller
    else:
        observer = verifier = NoTelemetry()
    board, poller = (quota.board, quota.poller) if quota is not None else (None, None)
    budget = stores.budget
    # Counters follow each row on its way to the ledger; gauges read the board when scraped.
    metrics = GatewayMetrics()
    pins, shared_pins = _session_pins(settings, link, metrics, clock, roster)
    planner = Planner(
        table=table,
        ladder=LadderInputs(
            roster=roster,
            settings=settings.ladder,
            clock=clock,
            state=state,
            budget=budget,
            verifier=verifier,
            pins=pins,
        ),
        connections=connections,
        adapter_for=lambda provider: provider_entry(provider).adapter,
    )
    metrics.registry.register(
        StateCollector(
            connection_ids=roster.connections,
            state=state,
            clock=clock,
            ladder=settings.ladder,
            rung_spend=budget.rung_spend,
        )
    )
    recorder: Recorder = MetricsRecorder(store, metrics)
    if access is not None:
        recorder = AccessLog(recorder, access)
    engine = Engine(
        transport=client,
        timeouts=settings.timeouts,
        recorder=recorder,
        quota=observer,
        budget=budget,
        clock=clock,
        codec_for=codec_for,
        prices=PriceBook(settings.prices),
        pins=pins,
    )
    keys = ClientKeys({key.name: secrets[f"client:{key.name}"] for key in settings.client_keys})

    background: list[asyncio.Task[None]] = []

    async def startup() -> None:
        await client.start()
        # Never raises: an unreachable Redis or PostgreSQL leaves its store degraded.
        await stores.start(clock.now())
        # A Code Assist login's project is named by its first request and its quota poll.
        await discover_projects(projects, settings.quota.inline_deadline_s * 4)
        if poller is not None and settings.quota.poll_interval_s > 0:
            background.append(asyncio.get_running_loop().create_task(poller.run()))
        settle_heap()

    async def shutdown() -> None:
        for task in background:
            task.cancel()
        await client.close()
        # What the shared store has not written yet goes before the link closes.
        await _stop_sharing(quota, shared_pins)
        await stores.stop()
        if quota is not None:
            quota.kept.close()

    app = GatewayApp(
        planner=planner,
        engine=engine,
        keys=keys,
        rate=RequestRate(
            {
                key.name: key.requests_per_minute
                for key in settings.client_keys
                if key.requests_per_minute is not None
            },
            clock,
            # Shared by every process of the cluster; each its own while Redis is away.
            _shared_rate(link),
        ),
        admin=AdminApi(
            roster=roster,
            state=state,
            board=board,
            poller=poller,
            clock=clock,
            key=secrets.get("admin"),
            ledger=stores.postgres or store,
            ladder=settings.ladder,
            client_keys=settings.client_keys,
            rung_spend=budget.rung_spend,
            pins=pins,
        ),
        max_body_bytes=settings.server.max_body_bytes,
        on_startup=startup,
        on_shutdown=shutdown,
        metrics=MetricsEndpoint(metrics.registry, secrets.get("admin")),
        dashboard=DashboardPages(),
        access=access,
        health=stores.health,
        stopped_writer=store.stopped_writer,
    )
    return Gateway(app, store, board, roster, link, stores.postgres, pins)


@dataclass(frozen=True, slots=True)
class _LiveQuota:
    board: QuotaBoard
    poller: UsagePoller
    kept: StateStore
    shared: RedisStateStore | None = None
    """The same store as `kept` when the state is shared through Redis."""


def _live_quota(
    settings: Settings,
    *,
    connections: dict[str, Connection],
    roster: Roster,
    stores: Stores,
    client: Http11Transport,
    clock: Clock,
) -> _LiveQuota:
    link = stores.link
    shared: RedisStateStore | None = None
    claim: RedisPollClaim | None = None
    if link is not None:
        from rungway.cluster.polls import RedisPollClaim  # noqa: PLC0415 - only with a cluster
        from rungway.cluster.state import RedisStateStore  # noqa: PLC0415 - only with a cluster

        shared, claim = RedisStateStore(link, clock), RedisPollClaim(link)
    kept = shared or stores.state_store(settings)
    board = QuotaBoard(settings.ladder, store=kept)
    if shared is not None:
        # The shared state is loaded each time the link joins Redis, and followed after.
        shared.attach(board, roster.connections)
    else:
        board.restore(kept.load(), clock.now(), roster.connections)
    poller = UsagePoller(
        board,
        _usage_targets(connections.values()),
        client.get,
        clock,
        settings.ladder,
        interval_s=settings.quota.poll_interval_s,
        deadline_s=settings.quota.inline_deadline_s,
        claim=claim,
    )
    return _LiveQuota(board, poller, kept, shared)


def _session_pins(
    settings: Settings,
    link: RedisLink | None,
    metrics: GatewayMetrics,
    clock: Clock,
    roster: Roster,
) -> tuple[PinStore | None, RedisPins | None]:
    """The session pins (none without affinity), shared through Redis when a cluster has
    one, with their gauges in `metrics`; and the shared store, to stop at shutdown."""
    if not settings.ladder.session_affinity:
        return None, None
    pins: PinStore = MemoryPins(settings.ladder.session_ttl_s)
    shared: RedisPins | None = None
    if link is not None:
        from rungway.cluster.pins import RedisPins  # noqa: PLC0415 - only with a cluster

        pins = shared = RedisPins(link, MemoryPins(settings.ladder.session_ttl_s))
    metrics.registry.register(SessionCollector(pins, clock, roster.connections))
    return pins, shared


def _shared_rate(link: RedisLink | None) -> RedisRateWindows | None:
    """The request rate windows every process of the cluster shares (none for a lone gateway)."""
    if link is None:
        return None
    from rungway.cluster.rate import RedisRateWindows  # noqa: PLC0415 - only with a cluster

    return RedisRateWindows(link)


async def _stop_sharing(quota: _LiveQuota | None, pins: RedisPins | None) -> None:
    if quota is not None and quota.shared is not None:
        await quota.shared.stop()
    if pins is not None:
        await pins.stop()


def builtin_catalog() -> list[CatalogEntry]:
    """The curated billing catalog shipped in the package."""
    text = resources.files("rungway.routing").joinpath("billing_catalog.yaml").read_text()
    return [
        CatalogEntry(
            provider=entry["provider"],
            auth=entry.get("auth"),
            billing=BillingClass(entry["billing"]),
            overage=entry["overage"],
            reason=" ".join(entry["reason"].split()),
            terms=parse_terms(entry["terms"], KNOWN_CLIENTS) if "terms" in entry else None,
        )
        for entry in yaml.safe_load(text)
    ]


def build_roster(settings: Settings) -> Roster:
    """Every connection's static ladder facts: billing, and per model its rung and tier."""
    operator = [
        CatalogEntry(e.provider, e.auth, e.billing, e.overage, e.reason, source="config")
        for e in settings.billing
    ]
    catalog = Catalog([*operator, *builtin_catalog()])
    extra = category_rows(settings)
    capability_extra = capability_rows(settings)
    prices = PriceBook(settings.prices)
    connections = []
    for config in settings.connections:
        billing = catalog.classify(config.provider, config.auth.value)
        served = []
        for model in config.models:
            verdict = classify_tier(config.provider, model, settings.tiers, prices=prices)
            price = verdict.price.input_per_mtok if verdict.price is not None else None
            capabilities = model_capabilities(model, capability_extra)
            if capabilities.context_window is None:
                # The maintained source: genai-prices lists most metered models' windows.
                window = listed_context_window(config.provider, model)
                if window is not None:
                    capabilities = replace(capabilities, context_window=window)
            served.append(
                ServedModel(
                    model,
                    rung_for(billing, verdict.tier),
                    verdict.tier,
                    float(price) if price is not None else None,
                    model_categories(model, extra),
                    capabilities,
                )
            )
        api = provider_entry(config.provider).adapter.api.value
        terms = ConnectionTerms(
            catalog.terms(config.provider, config.auth.value),
            widened=config.clients == "any",
            client_key=config.client_key,
        )
        connections.append(
            RosterConnection(
                config.id,
                config.provider,
                config.auth.value,
                api,
                billing,
                tuple(served),
                terms,
                owner=config.pool_owner,
            )
        )
    return Roster(connections)


def _usage_targets(connections: Iterable[Connection]) -> list[PollTarget]:
    targets = []
    for connection in connections:
        adapter = provider_entry(connection.provider).adapter
        if isinstance(adapter, HasUsageEndpoint):
            target = adapter.usage_target(connection)
            if target is not None:
                proxied = connection.proxy is not None
                targets.append(replace(target, proxy=connection.proxy) if proxied else target)
    return targets


def settle_heap() -> None:
    """Move everything alive after start-up out of the garbage collector's sight.

    Start-up leaves hundreds of thousands of long-lived objects (pydantic models, aiohttp,
    uvicorn); a full collection walking them all stalls every request for milliseconds.
    Frozen, they are never scanned again, and a larger young generation makes collections
    rarer: the gateway's p99 at concurrency 16 drops from about 16 ms to about 5 ms.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(7000, 20, 20)


def _base_url(configured: str | None, provider: str) -> str:
    url = configured or provider_entry(provider).default_base_url
    assert url is not None, "config validation requires base_url for custom providers"
    return url.rstrip("/")
