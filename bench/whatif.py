"""How long `rungway whatif` takes: a month of one heavy user under all five policies.

A weekly-cap synthetic trace (100,000 requests by default, a Claude Code user on a Claude
plan with an Anthropic key and a cheap DeepSeek key, the `claude-*` names sent to
`auto/thrifty`, claude-max-5x windows) is replayed by each policy in turn; each policy's
wall and CPU time and the totals are printed, with the interpreter's flags, since
`python -O` is how the speed target is measured.

    python -O bench/whatif.py [--requests 100000] [--seed 0] [--profile POLICY]
"""

from __future__ import annotations

import argparse
import cProfile
import platform
import pstats
import time

from rungway.config import parse_settings
from rungway.pricing import PriceBook
from rungway.whatif.metrics import measure
from rungway.whatif.oracle import Oracle
from rungway.whatif.outcome import Policy, PolicyRun, World
from rungway.whatif.plans import KNOWN_PLANS, PlanQuota
from rungway.whatif.policies import AlwaysKey, FallbackOn429, LadderPolicy, TtlCached
from rungway.whatif.synthetic import generate


def _world() -> World:
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
    settings = parse_settings(
        {
            "ladder": {"rung_budget_usd": {"cheap": None, "premium": None}},
            "connections": [
                connection("plan", "anthropic", "oauth", claude),
                connection("api", "anthropic", "apikey", claude),
                connection("cheap", "deepseek", "apikey", ["deepseek-chat"]),
            ],
            "aliases": {"claude-*": "auto/thrifty"},
        }
    )
    plans = {"plan": PlanQuota("plan", KNOWN_PLANS["claude-max-5x"])}
    return World(settings, plans, PriceBook(settings.prices))


def main() -> None:
    """Replay the trace under each policy and print the times."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", help="profile this policy's replay instead")
    options = parser.parse_args()
    world = _world()
    started = time.perf_counter()
    trace = generate("weekly-cap", requests=options.requests, seed=options.seed)
    print(f"trace: {len(trace):,} requests in {time.perf_counter() - started:.1f} s")
    policies: list[Policy] = [LadderPolicy(), AlwaysKey(), FallbackOn429(), TtlCached(), Oracle()]
    if options.profile:
        chosen = next(policy for policy in policies if policy.name == options.profile)
        profiler = cProfile.Profile()
        profiler.runcall(chosen.run, trace, world, lambda count: None)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        return
    runs: list[PolicyRun] = []
    total = cpu_total = 0.0
    for policy in policies:
        started, cpu = time.perf_counter(), time.process_time()
        runs.append(policy.run(trace, world, lambda count: None))
        took, cpu = time.perf_counter() - started, time.process_time() - cpu
        total += took
        cpu_total += cpu
        print(f"{policy.name:>14}: {took:6.1f} s ({cpu:.1f} s of CPU)")
    flags = f"python {platform.python_version()}, -O: {not __debug__}"
    # On a shared machine the CPU time is the figure to compare: the wall time waits too.
    print(f"{'all five':>14}: {total:6.1f} s ({cpu_total:.1f} s of CPU; {flags})")
    oracle = runs[-1]
    for run in runs:
        figures = measure(run, oracle)
        print(f"{run.policy:>14}: paid ${figures.paid_usd:,.2f}, x{figures.ratio_to_oracle:.3f}")


if __name__ == "__main__":
    main()
