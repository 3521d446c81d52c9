"""Pools in what-if: staggered accounts, the prompt cache, moves, unused quota, strategies."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rungway.config import parse_settings
from rungway.engine.waiting import WAKE_MARGIN_S
from rungway.pricing import PriceBook, TokenCounts
from rungway.routing.settings import LadderSettings
from rungway.whatif.accounts import pooled, staggered
from rungway.whatif.outcome import Placement, PolicyRun, WindowUse, World
from rungway.whatif.plans import PlanError, PlanQuota, PlanWindow
from rungway.whatif.pool_metrics import (
    cache_hit_share,
    measure_pool,
    session_moves,
    unused_at_resets,
)
from rungway.whatif.pool_replay import pool_policy
from rungway.whatif.prompt_cache import PromptCache, settled
from rungway.whatif.synthetic import generate
from rungway.whatif.trace import TraceRequest
from tests.unit.whatif.world import HOUR, T0, world

DAY = 24 * HOUR
WEEK = 7 * DAY


def _turn(at: float, session: str = "a", read: int = 40_000, write: int = 1_000) -> TraceRequest:
    return TraceRequest(
        at,
        "auto/thrifty",
        "anthropic_messages",
        20,
        300,
        cache_read_tokens=read,
        cache_write_tokens=write,
        session=session,
    )


def test_three_accounts_get_windows_staggered_by_a_third_of_each_length() -> None:
    windows = (
        PlanWindow("5h", 5 * HOUR, 10, "requests", "first_use"),
        PlanWindow("7d", WEEK, 50, "requests", "first_use"),
    )
    pool = pooled(world(windows=windows), {"plan": 3}, T0)
    ids = [connection.id for connection in pool.settings.connections]
    assert ids == ["plan-1", "plan-2", "plan-3", "api", "cheap"]
    assert set(pool.plans) == {"plan-1", "plan-2", "plan-3"}
    for k, account in enumerate(("plan-1", "plan-2", "plan-3")):
        five, seven = pool.plans[account].windows
        assert (five.alignment, seven.alignment) == ("fixed", "fixed")
        assert five.anchor == pytest.approx(T0 + k * 5 * HOUR / 3)
        assert seven.anchor == pytest.approx(T0 + k * WEEK / 3)
        assert (five.capacity, seven.capacity) == (10, 50), "each account has its own allowance"


def test_a_midnight_window_stays_where_the_provider_puts_it() -> None:
    daily = PlanWindow("1d", DAY, 100, "requests", "midnight", zone="America/Los_Angeles")
    assert staggered(daily, 2, 3, T0) is daily


def test_a_pool_of_a_connection_without_quota_or_a_clashing_id_is_refused() -> None:
    with pytest.raises(PlanError, match="not a plan connection"):
        pooled(world(), {"cheap": 2}, T0)
    with pytest.raises(PlanError, match="1 to 64"):
        pooled(world(), {"plan": 0}, T0)


def test_each_staggered_account_admits_its_own_capacity_and_resets_on_its_own_grid() -> None:
    # Two accounts of 3 requests per 10 h, the second's grid 5 h later; a request an hour.
    windows = (PlanWindow("10h", 10 * HOUR, 3, "requests", "first_use"),)
    pool = pooled(world(windows=windows), {"plan": 2}, T0)
    trace = tuple(_turn(T0 + HOUR * i + 1, read=0, write=0) for i in range(12))
    run = pool_policy("fill-first").run(trace, pool, lambda n: None)
    ids = [p.connection_id for p in run.placements]
    # plan-1 serves 3, then plan-2 (its window opened at T0 - 5 h, ends T0 + 5 h) serves 3;
    # plan-2 resets at T0 + 5 h and serves again; plan-1 comes back at T0 + 10 h.
    assert ids[:3] == ["plan-1"] * 3
    assert ids[3:5] == ["plan-2"] * 2
    assert ids[5:8] == ["plan-2"] * 3, "plan-2's own reset, 5 h before plan-1's"
    assert ids[10] == "plan-1"
    starts = sorted({(use.connection_id, use.start - T0) for use in run.window_use})
    assert ("plan-2", -5 * HOUR) in starts
    assert ("plan-2", 5 * HOUR) in starts
    assert ("plan-1", 10 * HOUR) in starts


def test_the_cache_hits_on_the_account_that_served_the_last_turn_within_its_ttl() -> None:
    cache = PromptCache(300)
    first = _turn(T0, read=0, write=40_000)
    assert cache.as_served(first, "p1", T0) is first
    cache.served(first, "p1", T0)
    second = _turn(T0 + 60)
    assert cache.as_served(second, "p1", T0 + 60) is second, "same account, within the TTL"
    moved = cache.as_served(second, "p2", T0 + 60)
    assert (moved.cache_read_tokens, moved.cache_write_tokens) == (0, 41_000)
    late = cache.as_served(second, "p1", T0 + 301)
    assert late.cache_read_tokens == 0, "past the TTL the cache is gone"
    side = TraceRequest(T0 + 70, "auto/thrifty", "anthropic_messages", 900, 50, session="a")
    cache.served(side, "p3", T0 + 70)
    assert cache.holds(second, "p1", T0 + 70), "a side request leaves the session's cache"


def test_a_session_back_on_its_account_reads_the_prefix_it_left_there() -> None:
    cache = PromptCache(300)
    cache.served(_turn(T0, read=0, write=16_000), "p1", T0)
    # The next turn goes elsewhere (a paid key while the pool is spent) and adds to it.
    away = cache.as_served(_turn(T0 + 30, read=16_000, write=2_000), "paid", T0 + 30)
    assert (away.cache_read_tokens, away.cache_write_tokens) == (0, 18_000)
    cache.served(away, "paid", T0 + 30)
    # Back on p1: the 16,000 it holds are read, the 2,000 added since are written.
    back = cache.as_served(_turn(T0 + 60, read=18_000, write=1_000), "p1", T0 + 60)
    assert (back.cache_read_tokens, back.cache_write_tokens) == (16_000, 3_000)
    cache.served(back, "p1", T0 + 60)
    later = _turn(T0 + 90, read=19_000, write=500)
    assert cache.as_served(later, "p1", T0 + 90) is later
    assert cache.cached(later, "paid", T0 + 400) == 0, "the paid key's copy has expired"


def test_settled_writes_again_the_turns_past_the_cache_ttl_wherever_they_go() -> None:
    trace = (_turn(T0, read=0, write=40_000), _turn(T0 + 200), _turn(T0 + 900))
    out = settled(trace, 300)
    assert out[1] == trace[1]
    assert (out[2].cache_read_tokens, out[2].cache_write_tokens) == (0, 41_000)


def test_a_turn_moved_off_its_account_pays_its_context_as_a_cache_write() -> None:
    # One account holding 2 requests per 5 h: the third turn goes to the cheap key.
    pool = world(capacity=2)
    trace = (
        _turn(T0, read=0, write=40_000),
        _turn(T0 + 10),
        _turn(T0 + 20),
        _turn(T0 + 30),
    )
    run = pool_policy("fill-first").run(trace, pool, lambda n: None)
    ids = [p.connection_id for p in run.placements]
    assert ids == ["plan", "plan", "cheap", "cheap"]
    reads = [read for read, _ in run.cache]
    assert reads == [0, 40_000, 0, 40_000], "a miss where the session moved, then hits there"
    assert cache_hit_share(run, trace) == pytest.approx(80_000 / sum(t for _, t in run.cache))
    assert session_moves(run, trace) == 1
    # The move costs more on the cheap key than the same turn read from its cache.
    assert run.placements[2].cost_usd > run.placements[3].cost_usd


def test_moves_count_a_session_served_by_another_connection_than_its_last_turn() -> None:
    trace = tuple(_turn(T0 + i, session=s) for i, s in enumerate("aabab"))
    where = ["p1", "p1", "p2", None, "p1"]
    placements = tuple(
        Placement(i, c, 0 if c else None, 0.0, 0.0, refusal=None if c else "quota")
        for i, c in enumerate(where)
    )
    # a: p1, p1, (refused), then p1 again: no move; b: p2 then p1: one move.
    assert session_moves(PolicyRun("x", placements), trace) == 1


def test_unused_quota_counts_the_share_left_at_each_reset_within_the_trace() -> None:
    windows = (PlanWindow("1d", DAY, 10, "requests", "fixed", anchor=T0),)
    pool = replace(
        world(windows=windows), plans={"plan": replace(world().plans["plan"], windows=windows)}
    )
    trace = (_turn(T0 + 1), _turn(T0 + 3 * DAY + 1))
    uses = (
        WindowUse("plan", "1d", T0, T0 + DAY, 4, 10),
        WindowUse("plan", "1d", T0 + DAY, T0 + 2 * DAY, 12, 10),
    )
    run = PolicyRun("x", (), uses)
    unused, resets = unused_at_resets(run, pool, trace)
    # Resets at T0 + 1, 2 and 3 days: 60 % left, none (past full), and an idle day's 100 %.
    assert resets == {"1d": 3}
    assert unused["1d"] == pytest.approx(0.6 + 0.0 + 1.0)


def test_a_near_reset_is_waited_for_instead_of_paid_and_not_with_waits_off() -> None:
    pool = world(capacity=2, ladder={"rung_budget_usd": {"cheap": None}, "max_wait_s": 30})
    trace = (
        _turn(T0, read=0, write=16_000),
        _turn(T0 + 10),
        _turn(T0 + 5 * HOUR - 20),
    )
    waited = pool_policy("fill-first").run(trace, pool, lambda n: None)
    assert [p.connection_id for p in waited.placements] == ["plan", "plan", "plan"]
    # Held to the reset and the engine's margin past it.
    assert waited.waits == pytest.approx((20.0 + WAKE_MARGIN_S,))
    paid = pool_policy("fill-first+no-wait").run(trace, pool, lambda n: None)
    assert paid.placements[2].connection_id == "cheap"
    assert paid.waits == ()
    assert measure_pool(paid, trace, pool).paid_usd > measure_pool(waited, trace, pool).paid_usd


def test_affinity_keeps_a_session_on_its_account_where_round_robin_moves_it() -> None:
    windows = (PlanWindow("5h", 5 * HOUR, 1_000, "requests", "first_use"),)
    pool = pooled(world(windows=windows), {"plan": 3}, T0)
    trace = tuple(_turn(T0 + 10 * i, session="ab"[i % 2]) for i in range(30))
    kept = pool_policy("headroom+affinity").run(trace, pool, lambda n: None)
    turned = pool_policy("round-robin").run(trace, pool, lambda n: None)
    assert session_moves(kept, trace) == 0
    assert session_moves(turned, trace) > 5
    assert cache_hit_share(kept, trace) > cache_hit_share(turned, trace)


def test_unknown_pool_policy_names_are_refused() -> None:
    for name in ("fill_first", "headroom+sticky", "headroom+affinity+affinity"):
        with pytest.raises(ValueError, match=name.replace("+", r"\+")):
            pool_policy(name)


def test_the_default_strategy_leaves_less_quota_at_resets_than_fill_first() -> None:
    # A heavy user's four days on three accounts whose daily cost windows are staggered by
    # eight hours, together about a day's use a day.
    trace = settled(generate("weekly-cap", requests=2_500, seed=0))
    settings = parse_settings(
        {
            "ladder": {"rung_budget_usd": {"cheap": None, "premium": None}},
            "connections": [
                {
                    "id": "plan",
                    "provider": "anthropic",
                    "auth": "oauth",
                    "credential": {"env": "W_PLAN"},
                    "models": ["claude-sonnet-4-5"],
                },
                {
                    "id": "cheap",
                    "provider": "deepseek",
                    "auth": "apikey",
                    "credential": {"env": "W_CHEAP"},
                    "models": ["deepseek-chat"],
                },
            ],
            "aliases": {"claude-*": "auto/thrifty"},
        }
    )
    prices = PriceBook(settings.prices)
    rates = prices.rates("anthropic", "claude-sonnet-4-5")
    assert rates is not None
    use = sum(
        rates.cost(
            TokenCounts(r.input_tokens, r.output_tokens, r.cache_read_tokens, r.cache_write_tokens)
        )
        for r in trace
    )
    a_day = use / ((trace[-1].at - trace[0].at) / DAY) / 3
    quota = PlanQuota("plan", (PlanWindow("1d", DAY, a_day, "cost", "first_use"),))
    pool = pooled(World(settings, {"plan": quota}, prices), {"plan": 3}, trace[0].at)
    default = LadderSettings().pool_strategy.replace("_", "-") + "+affinity"
    figures = {
        name: measure_pool(pool_policy(name).run(trace, pool, lambda n: None), trace, pool)
        for name in (default, "fill-first")
    }
    assert figures[default].resets == figures["fill-first"].resets
    assert figures[default].unused["1d"] < figures["fill-first"].unused["1d"]


def test_expiry_longest_spends_first_the_account_whose_week_resets_soonest() -> None:
    # Two accounts bought half a week apart: at T0 the second's week has 1.5 days to run.
    windows = (PlanWindow("7d", WEEK, 1_000, "requests", "first_use"),)
    pool = pooled(world(windows=windows), {"plan": 2}, T0 - 2 * DAY)
    trace = tuple(_turn(T0 + 600 * i, session=f"s{i}", read=0, write=0) for i in range(12))
    run = pool_policy("expiry-longest+affinity").run(trace, pool, lambda n: None)
    ids = [p.connection_id for p in run.placements]
    # Each account is read once, then the one whose leftover expires first takes the rest.
    assert ids[:2] == ["plan-1", "plan-2"]
    assert ids[2:] == ["plan-2"] * 10
