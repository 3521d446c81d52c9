"""Microbenchmark of `plan_route`: the ladder's cost per request as the roster grows.

Rosters of 10, 100 and 1,000 connections, 20 models each, spread over ten providers: plan
logins (Claude Code, Codex, Gemini, Copilot with overage refused), a keyless local server,
metered keys with free, cheap and premium models, and an uncurated OpenAI-compatible
endpoint. Plan connections carry 5h and 7d windows (every third also a model-scoped
weekly window), half the metered keys carry a rate-limit window, every 13th connection is
cooling down, every 29th has a half-open breaker, and the paid rungs have budgets with some
spend. Every connection speaks the request's API, so nothing is cut early by API. Every
fourth model is known to read no images and to take 64k tokens; the others' capabilities
are unknown. The request needs room for a 3,000-token prompt and tools; the `+image` cases
also send an image, so every model's capabilities are checked and a quarter are skipped.

Plans of one provider form pools of up to a hundred accounts, ordered by the ladder's
`pool_strategy` (`--strategy`, the default `expiry_first` unless given); `--pinned` pins
every request's session to the second Claude account.

Each case times single calls with `time.perf_counter_ns` and reports the median and p99 in
microseconds, and how the median grows from one size to the next.

    python bench/plan_route.py [--seconds 1.5] [--profile SIZE] [--strategy NAME] [--pinned]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import platform
import pstats
import random
import statistics
import sys
import time
from dataclasses import dataclass
from typing import get_args

from rungway import app
from rungway.models.capabilities import UNKNOWN, ModelCapabilities
from rungway.pricing import Tier
from rungway.routing.autoid import Category, parse_auto_id
from rungway.routing.billing import BillingClass, Catalog
from rungway.routing.ladder import RouteRequest, plan_route
from rungway.routing.needs import RequestNeeds
from rungway.routing.rungs import Rung, rung_for
from rungway.routing.settings import LadderSettings, PoolStrategyName
from rungway.routing.snapshot import (
    BreakerState,
    ConnectionState,
    QuotaWindow,
    Roster,
    RosterConnection,
    RungSpend,
    ServedModel,
    Snapshot,
)

SIZES = (10, 100, 1_000)
MODELS_PER_CONNECTION = 20
LADDERS = ("auto/thrifty", "auto/subscription", "auto/thrifty+image", "auto/subscription+image")
TEXT_ONLY = ModelCapabilities(vision=False, context_window=64_000)
NEEDS = RequestNeeds(tools=True, prompt_tokens=3_000)
WITH_IMAGE = RequestNeeds(vision=True, tools=True, prompt_tokens=4_600)
API = "openai_chat"
NOW = 1_787_400_000.0
# (provider, auth): four plans, one keyless server, four metered vendors, one uncurated.
KINDS = (
    ("anthropic", "oauth"),
    ("codex", "oauth"),
    ("gemini", "oauth"),
    ("copilot", "oauth"),
    ("ollama", "none"),
    ("openai", "apikey"),
    ("deepseek", "apikey"),
    ("groq", "apikey"),
    ("openrouter", "apikey"),
    ("openai-compatible", "apikey"),
)
CATEGORIES = frozenset({Category.CODING, Category.CHAT})
SETTINGS = LadderSettings(rung_budget_usd={"cheap": 5.0, "premium": 50.0})
SPEND = {Rung.CHEAP: RungSpend(2.0, 0.25), Rung.PREMIUM: RungSpend(10.0)}


def builtin_catalog() -> Catalog:
    """The curated catalog shipped in the package."""
    return Catalog(app.builtin_catalog())


def served_models(provider: str, rung_of: dict[Tier, Rung]) -> tuple[ServedModel, ...]:
    models = []
    for j in range(MODELS_PER_CONNECTION):
        if j % 5 == 0:
            tier, price = Tier.FREE, 0.0
        elif j % 5 in (1, 2):
            tier, price = Tier.CHEAP, 0.2 * (j % 5) + 0.01 * j
        else:
            tier, price = Tier.PREMIUM, 2.5 + 0.1 * j
        capabilities = TEXT_ONLY if j % 4 == 3 else UNKNOWN
        models.append(
            ServedModel(
                f"{provider}-model-{j:02d}", rung_of[tier], tier, price, CATEGORIES, capabilities
            )
        )
    return tuple(models)


def world(size: int, seed: int = 7) -> Snapshot:
    """A roster of `size` connections and the state of each, reproducibly."""
    rng = random.Random(seed)
    catalog = builtin_catalog()
    connections = []
    states: dict[str, ConnectionState] = {}
    for i in range(size):
        provider, auth = KINDS[i % len(KINDS)]
        billing = catalog.classify(provider, auth, overage_permitted=False)
        rung_of = {tier: rung_for(billing, tier) for tier in Tier}
        models = served_models(provider, rung_of)
        conn_id = f"{provider}-{i}"
        connections.append(RosterConnection(conn_id, provider, auth, API, billing, models))
        windows: list[QuotaWindow] = []
        if billing.billing is BillingClass.SUBSCRIPTION:
            windows.append(window("5h", rng.uniform(5, 99.5), 5 * 3_600, rng))
            windows.append(window("7d", rng.uniform(5, 90), 7 * 86_400, rng))
            if i % 3 == 0:
                windows.append(window("7d_opus", rng.uniform(5, 99), 7 * 86_400, rng))
                windows[-1] = _scoped(windows[-1], models[0].model)
        elif auth == "apikey" and i % 2 == 0:
            windows.append(window("requests", rng.uniform(0, 60), 60, rng))
        cooldown = NOW + 30 if i % 13 == 5 else None
        breaker = BreakerState.HALF_OPEN if i % 29 == 7 else BreakerState.CLOSED
        if windows or cooldown or breaker is not BreakerState.CLOSED:
            states[conn_id] = ConnectionState(tuple(windows), cooldown, "429", breaker)
    return Snapshot(Roster(connections), states, SPEND)


def window(name: str, used: float, length: float, rng: random.Random) -> QuotaWindow:
    return QuotaWindow(
        name=name,
        used_percent=used,
        resets_at=NOW + rng.uniform(60, length),
        checked_at=NOW - rng.uniform(0, 120),
        was_exhausted=used > 97,
    )


def _scoped(w: QuotaWindow, model: str) -> QuotaWindow:
    return QuotaWindow(w.name, w.used_percent, w.resets_at, w.checked_at, model=model)


@dataclass(frozen=True, slots=True)
class Result:
    """One case's timings, in microseconds."""

    size: int
    ladder: str
    iterations: int
    median_us: float
    p99_us: float
    candidates: int
    skipped: int


PINNED = f"anthropic-{len(KINDS)}"
"""The second Claude account of every roster of ten or more."""


def route_request(case: str, *, pinned: bool = False) -> RouteRequest:
    """The request of a case: `auto_id`, or `auto_id+image` for one that sends an image."""
    auto_id, image, _ = case.partition("+image")
    needs = WITH_IMAGE if image else NEEDS
    return RouteRequest(
        auto_id, parse_auto_id(auto_id), API, needs, pinned=PINNED if pinned else None
    )


def measure(
    size: int,
    auto_id: str,
    seconds: float,
    settings: LadderSettings = SETTINGS,
    *,
    pinned: bool = False,
) -> Result:
    snapshot = world(size)
    request = route_request(auto_id, pinned=pinned)
    plan = plan_route(request, settings, snapshot, NOW)
    clock = time.perf_counter_ns
    start = clock()
    for _ in range(5):
        plan_route(request, settings, snapshot, NOW)
    per_call = (clock() - start) / 5
    iterations = max(200, min(50_000, int(seconds * 1e9 / max(per_call, 1.0))))
    samples = [0] * iterations
    gc.collect()
    for k in range(iterations):
        began = clock()
        plan_route(request, settings, snapshot, NOW)
        samples[k] = clock() - began
    samples.sort()
    p99 = samples[min(iterations - 1, round(0.99 * (iterations - 1)))]
    return Result(
        size,
        auto_id,
        iterations,
        statistics.median(samples) / 1_000,
        p99 / 1_000,
        len(plan.candidates),
        len(plan.skipped),
    )


def profile(size: int, auto_id: str) -> None:
    snapshot = world(size)
    request = route_request(auto_id)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(max(20, 20_000 // size)):
        plan_route(request, SETTINGS, snapshot, NOW)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.5, help="time per case")
    parser.add_argument("--profile", type=int, metavar="SIZE", help="cProfile one size instead")
    parser.add_argument(
        "--strategy",
        choices=get_args(PoolStrategyName),
        default=SETTINGS.pool_strategy,
        help="the ladder's pool strategy",
    )
    parser.add_argument("--pinned", action="store_true", help="pin each request's session")
    args = parser.parse_args()
    settings = SETTINGS.model_copy(update={"pool_strategy": args.strategy})
    if args.profile:
        for auto_id in LADDERS:
            print(f"== {auto_id}, {args.profile} connections")
            profile(args.profile, auto_id)
        return
    print(f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})")
    print(f"pool strategy {args.strategy}" + (", pinned" if args.pinned else ""))
    print(
        f"{'ladder':<24} {'conns':>6} {'cands':>6} {'skips':>6} {'iters':>7} "
        f"{'median µs':>10} {'p99 µs':>10} {'growth':>7}"
    )
    for auto_id in LADDERS:
        previous: Result | None = None
        for size in SIZES:
            result = measure(size, auto_id, args.seconds, settings, pinned=args.pinned)
            growth = "" if previous is None else f"{result.median_us / previous.median_us:.1f}x"
            print(
                f"{auto_id:<24} {size:>6} {result.candidates:>6} {result.skipped:>6} "
                f"{result.iterations:>7} {result.median_us:>10.1f} {result.p99_us:>10.1f} "
                f"{growth:>7}"
            )
            previous = result


if __name__ == "__main__":
    main()
