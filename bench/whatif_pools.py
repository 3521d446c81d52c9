"""The what-if table for pools: each pool policy on each synthetic profile, 2 to 4 accounts.

A Claude Code user (the `claude-*` names sent to `auto/thrifty`) with a pool of Claude plan
accounts bought on different days (staggered windows), an Anthropic key and a cheap
DeepSeek key. The plan's windows are in cost units (list-price US dollars at the plan's
model): a 7-day window and a 5-hour window a fifth of it. So every profile contends for
its pool, each account's 7-day window holds `--share` (0.9 by default) of the profile's
mean weekly list-price use divided by the accounts. Each profile's trace spans about four
weeks. Each policy is replayed with the prompt cache (`whatif/prompt_cache.py`) and set
against the oracle's bound (which reads every turn as a cache hit, so it stays a bound).

Prints one markdown table per profile, the columns as README's what-if table for pools
(unused quota in window-equivalents left at the resets within the trace, of how many
resets; see `whatif/pool_metrics.py`):

    python bench/whatif_pools.py [--seed 0] [--share 0.9] [--accounts 2,3,4]
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

from rungway.config import parse_settings
from rungway.pricing import PriceBook, TokenCounts
from rungway.whatif.accounts import pooled
from rungway.whatif.oracle import Oracle
from rungway.whatif.outcome import PolicyRun, World
from rungway.whatif.plans import PlanQuota, PlanWindow
from rungway.whatif.pool_metrics import PoolMetrics, measure_pool
from rungway.whatif.pool_replay import POOL_POLICY_NAMES, pool_policy
from rungway.whatif.prompt_cache import settled
from rungway.whatif.synthetic import generate
from rungway.whatif.trace import Trace

_HOUR = 3600.0
_WEEK = 7 * 24 * _HOUR
REQUESTS = {"steady": 4_000, "bursty": 6_000, "weekly-cap": 16_000}
"""About four weeks of each profile."""
POLICIES = (*POOL_POLICY_NAMES, "expiry-longest+affinity")
"""The default pool policies, and the replay's candidate expiry order (`pool_order.py`)."""


def _settings() -> Any:
    def connection(connection_id: str, provider: str, auth: str, models: list[str]) -> object:
        credential = {"env": f"BENCH_{connection_id.upper()}"}
        return {
            "id": connection_id,
            "provider": provider,
            "auth": auth,
            "credential": credential,
            "models": models,
        }

    claude = ["claude-sonnet-4-5", "claude-haiku-4-5"]
    return parse_settings(
        {
            "ladder": {"rung_budget_usd": {"cheap": None, "premium": None}},
            "connections": [
                # One model on the plan: the ladder and the oracle then put a request on
                # it at the same list price (auto/thrifty could pick either model).
                connection("plan", "anthropic", "oauth", ["claude-sonnet-4-5"]),
                connection("api", "anthropic", "apikey", claude),
                connection("cheap", "deepseek", "apikey", ["deepseek-chat"]),
            ],
            "aliases": {"claude-*": "auto/thrifty"},
        }
    )


def weekly_use(trace: Trace, prices: PriceBook) -> float:
    """The trace's mean list-price use a week at the plan's model, as the trace has it."""
    total = 0.0
    rates = prices.rates("anthropic", "claude-sonnet-4-5")
    for request in trace:
        if rates is not None:
            total += rates.cost(
                TokenCounts(
                    request.input_tokens,
                    request.output_tokens,
                    request.cache_read_tokens,
                    request.cache_write_tokens,
                )
            )
    weeks = max(1.0, (trace[-1].at - trace[0].at) / _WEEK)
    return total / weeks


def world(trace: Trace, accounts: int, share: float) -> World:
    """The pool of `accounts` accounts sized to `share` of the trace's weekly use."""
    settings = _settings()
    prices = PriceBook(settings.prices)
    week = share * weekly_use(trace, prices) / accounts
    windows = (
        PlanWindow("5h", 5 * _HOUR, week / 5, "cost", "first_use"),
        PlanWindow("7d", _WEEK, week, "cost", "first_use"),
    )
    base = World(settings, {"plan": PlanQuota("plan", windows)}, prices)
    return pooled(base, {"plan": accounts}, trace[0].at)


def rows(profile: str, accounts: int, share: float, seed: int) -> list[PoolMetrics]:
    """Every pool policy's figures, and the oracle's, on one profile and pool size."""
    # The misses a cache's TTL makes on any account are in the trace every policy sees.
    trace = settled(generate(profile, requests=REQUESTS[profile], seed=seed))
    pool = world(trace, accounts, share)
    oracle = Oracle().run(trace, pool, lambda count: None)
    runs: list[PolicyRun] = [
        pool_policy(name).run(trace, pool, lambda count: None) for name in POLICIES
    ]
    return [measure_pool(run, trace, pool, oracle) for run in [*runs, oracle]]


def table(profile: str, figures: dict[int, list[PoolMetrics]]) -> str:
    """One profile's markdown table."""
    lines = [
        f"**{profile}** ({REQUESTS[profile]:,} requests)",
        "",
        "| accounts | policy | paid | x bound | unused 7d | unused 5h | cache hits | moves"
        " | waits |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for accounts, listed in figures.items():
        for figure in listed:
            shown = "-" if figure.ratio_to_bound is None else _ratio(figure.ratio_to_bound)
            lines.append(
                f"| {accounts} | {figure.policy} | ${figure.paid_usd:,.2f} | {shown}"
                f" | {_unused(figure, '7d')} | {_unused(figure, '5h')}"
                f" | {figure.cache_hit_share:.1%} | {figure.moves:,} | {figure.waits:,} |"
            )
    return "\n".join(lines)


def _ratio(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:.3f}"


def _unused(figure: PoolMetrics, window: str) -> str:
    resets = figure.resets.get(window, 0)
    return f"{figure.unused.get(window, 0.0):.2f} / {resets}"


def main() -> None:
    """Print the table for every profile."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--share", type=float, default=0.9)
    parser.add_argument("--accounts", default="2,3,4")
    parser.add_argument("--profiles", default=",".join(REQUESTS))
    options = parser.parse_args()
    sizes = [int(size) for size in options.accounts.split(",")]
    started = time.perf_counter()
    for profile in options.profiles.split(","):
        figures = {size: rows(profile, size, options.share, options.seed) for size in sizes}
        print(table(profile, figures))
        print()
    print(
        f"seed {options.seed}, pool 7d windows {options.share:g} of weekly use;"
        f" made in {time.perf_counter() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
