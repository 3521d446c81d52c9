"""`rungway whatif`'s pool flags and figures: `--accounts CONN=N`, the pool policies, and
the table of quota left at resets, cache hits and session moves.

`--accounts CONN=N` replays plan connection CONN as N accounts bought on different days
(`whatif/accounts.py`: `CONN-1` to `CONN-N`, windows staggered by a 1/N of their length
from the trace's first request). With it, the policies compared by default are the pool
policies (`whatif/pool_replay.py`) and the oracle, and every policy replays the trace with
the cache misses a cache's TTL makes on any account already in it.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table

from rungway.cli.spend import money
from rungway.cli.whatif_plans import FlagError
from rungway.whatif.accounts import MAX_ACCOUNTS, pooled
from rungway.whatif.outcome import World
from rungway.whatif.pool_metrics import PoolMetrics
from rungway.whatif.pool_replay import POOL_POLICY_NAMES, PoolPolicy, pool_policy
from rungway.whatif.prompt_cache import settled
from rungway.whatif.trace import Trace

__all__ = ["POOL_POLICY_NAMES", "account_counts", "is_pool_policy", "pool_table", "pool_world"]


def account_counts(flags: Iterable[str]) -> dict[str, int]:
    """Each `--accounts CONN=N` flag as CONN: N; a FlagError for one that is not."""
    counts: dict[str, int] = {}
    for flag in flags:
        connection_id, equals, count = flag.partition("=")
        if not connection_id or not equals or not count.isdigit():
            raise FlagError(f"--accounts {flag}: write CONN=N, e.g. plan=3")
        if not 1 <= int(count) <= MAX_ACCOUNTS:
            raise FlagError(f"--accounts {flag}: N is 1 to {MAX_ACCOUNTS}")
        if connection_id in counts:
            raise FlagError(f"--accounts {flag}: {connection_id} is given twice")
        counts[connection_id] = int(count)
    return counts


def pool_world(world: World, counts: dict[str, int], trace: Trace) -> tuple[World, Trace]:
    """`world` with the pools `counts` asks for, bought from the trace's first request, and
    `trace` with the misses a cache's TTL makes on any account (so the oracle counts them
    too); a PlanError for a pool that cannot be."""
    if counts and trace:
        world = pooled(world, counts, trace[0].at)
    return world, settled(trace)


def is_pool_policy(name: str) -> PoolPolicy | None:
    """The pool policy `name` names, or None."""
    try:
        return pool_policy(name)
    except ValueError:
        return None


def pool_table(figures: list[PoolMetrics]) -> Table:
    """The pool figures of every policy, one row each."""
    windows = sorted({name for figure in figures for name in figure.resets})
    table = Table(title="pools", title_justify="left")
    headers = ["policy", "paid", "/ bound", *(f"unused {w}" for w in windows), "cache hits"]
    for header in [*headers, "moves", "waits"]:
        policy = header == "policy"
        table.add_column(header, justify="left" if policy else "right", no_wrap=policy)
    for figure in figures:
        ratio = figure.ratio_to_bound
        table.add_row(
            figure.policy,
            money(figure.paid_usd),
            "-" if ratio is None else f"{ratio:.3f}",
            *(f"{figure.unused.get(w, 0.0):.2f} of {figure.resets.get(w, 0)}" for w in windows),
            f"{figure.cache_hit_share:.1%}",
            f"{figure.moves:,}",
            f"{figure.waits:,} ({figure.waited_s:.0f} s)",
        )
    return table
