"""The served ladder replayed: plan first, one rung at a time, back at the reset; budgets."""

from __future__ import annotations

import pytest

from rungway.routing.rungs import Rung
from rungway.whatif.metrics import measure
from rungway.whatif.policies import AlwaysKey, FallbackOn429, LadderPolicy, TtlCached
from rungway.whatif.trace import TraceRequest
from tests.unit.whatif.world import HOUR, T0, steady, world


def _ids(run: object) -> list[str | None]:
    return [p.connection_id for p in run.placements]  # type: ignore[attr-defined]


def test_the_ladder_uses_the_plan_then_the_cheap_rung_then_the_plan_at_its_reset() -> None:
    # 10 requests fit the 5 h window; one request every 20 minutes for 12 hours.
    run = LadderPolicy().run(steady(36, 20 * 60), world(capacity=10), lambda n: None)
    ids = _ids(run)
    # The ladder leaves once the headers say the window is spent, before a 429.
    assert ids[:10] == ["plan"] * 10
    assert ids[10:15] == ["cheap"] * 5, "one rung at a time: cheap before the premium key"
    assert ids[15:25] == ["plan"] * 10, "back on the plan with the first request after reset"
    assert "api" not in ids
    assert all(p.cost_usd == 0 for p in run.placements if p.connection_id == "plan")
    assert all(p.cost_usd > 0 for p in run.placements if p.connection_id == "cheap")
    assert {p.rung for p in run.placements if p.connection_id == "cheap"} == {Rung.CHEAP}
    metrics = measure(run)
    assert metrics.flaps == 0
    assert [lag.requests for lag in metrics.lags] == [0, 0]
    assert metrics.max_lag_seconds == 0
    assert [round(u.used) for u in run.window_use] == [10, 10, 6]


def test_a_spent_rung_budget_sends_requests_up_and_then_refuses_them() -> None:
    budgets = {"rung_budget_usd": {"cheap": 0.002, "premium": 0.02}}
    run = LadderPolicy().run(steady(30, 60), world(capacity=2, ladder=budgets), lambda n: None)
    ids = _ids(run)
    assert ids[0] == "plan"
    cheap = [p for p in run.placements if p.connection_id == "cheap"]
    premium = [p for p in run.placements if p.connection_id == "api"]
    # The cheap rung's budget fills, then the premium key serves.
    assert cheap
    assert premium
    assert sum(p.cost_usd for p in cheap) <= 0.002
    assert sum(p.cost_usd for p in premium) <= 0.02
    assert ids.index("api") > max(i for i, c in enumerate(ids) if c == "cheap")
    metrics = measure(run)
    assert metrics.budget_refusals > 0
    assert metrics.budget_refusals == ids.count(None)


def test_a_client_keys_budget_refuses_its_requests_only() -> None:
    keys = [{"name": "alice", "key": {"env": "WHATIF_ALICE"}, "budget_usd": 0.005}]
    spec = world(capacity=1, client_keys=keys)
    alice = steady(10, 60, client_key="alice")
    bob = tuple(TraceRequest(r.at + 1, r.model, r.api, 2000, 500) for r in alice)
    trace = tuple(sorted(alice + bob, key=lambda r: r.at))
    run = LadderPolicy().run(trace, spec, lambda n: None)
    refused = [trace[p.index].client_key for p in run.placements if p.connection_id is None]
    assert refused
    assert set(refused) == {"alice"}
    assert all(p.refusal == "budget_exhausted" for p in run.placements if p.connection_id is None)
    alice_paid = sum(p.cost_usd for p in run.placements if trace[p.index].client_key == "alice")
    assert 0 < alice_paid <= 0.005


def test_always_the_key_never_touches_the_plan() -> None:
    run = AlwaysKey().run(steady(20, 600), world(), lambda n: None)
    assert set(_ids(run)) == {"cheap"}
    assert run.window_use == ()


def test_fallback_on_429_comes_back_late_and_ttl_comes_back_with_its_cache() -> None:
    # A request every 70 s: the plan resets after 5 h; the fixed 300 s cooldown and the
    # 180 s cache each hold requests off it past the reset.
    spec = world(capacity=10)
    trace = steady(int(11 * HOUR / 70), 70)
    ladder = measure(LadderPolicy().run(trace, spec, lambda n: None))
    fallback = measure(FallbackOn429().run(trace, spec, lambda n: None))
    cached = measure(TtlCached().run(trace, spec, lambda n: None))
    assert ladder.max_lag_requests == 0
    assert fallback.max_lag_requests > 0
    assert fallback.paid_usd >= ladder.paid_usd
    assert cached.lags
    assert cached.max_lag_seconds <= 180
    assert fallback.flaps == ladder.flaps == 0


def test_progress_counts_every_request() -> None:
    seen: list[int] = []
    LadderPolicy().run(steady(2500, 1), world(), seen.append)
    assert sum(seen) == 2500


def test_a_named_model_goes_to_its_connections_in_config_order() -> None:
    trace = steady(14, 60, model="claude-sonnet-4-5")
    ids = _ids(LadderPolicy().run(trace, world(capacity=10), lambda n: None))
    # Named: the plan until it refuses (no exit cut-off), then the key while it rests.
    assert ids[:10] == ["plan"] * 10
    assert ids[10:] == ["api"] * 4


def test_auto_subscription_reads_the_plan_then_refuses_until_its_reset() -> None:
    trace = steady(40, 20 * 60, model="auto/subscription")
    run = LadderPolicy().run(trace, world(capacity=10), lambda n: None)
    ids = _ids(run)
    assert ids[:10] == ["plan"] * 10, "the plan's usage is read before the first request"
    assert ids[10:15] == [None] * 5
    assert {p.refusal for p in run.placements[10:15]} == {"subscription_unavailable"}
    assert ids[15:25] == ["plan"] * 10
    assert sum(p.cost_usd for p in run.placements) == 0


@pytest.mark.parametrize("api", ["openai_chat", "openai_responses", "anthropic_messages", "gemini"])
def test_every_ingress_api_is_replayed_alike(api: str) -> None:
    trace = tuple(
        TraceRequest(T0 + 60 * i, "auto/thrifty", api, 1000, 100, stream=True) for i in range(15)
    )
    ids = _ids(LadderPolicy().run(trace, world(capacity=10), lambda n: None))
    assert ids == ["plan"] * 10 + ["cheap"] * 5


def test_the_baselines_serve_auto_subscription_from_the_plan_too() -> None:
    trace = steady(int(11 * HOUR / 70), 70, model="auto/subscription")
    spec = world(capacity=10)
    for policy in (FallbackOn429(), TtlCached()):
        run = policy.run(trace, spec, lambda n: None)
        ids = _ids(run)
        assert ids[:10] == ["plan"] * 10, policy.name
        assert set(ids) == {"plan", None}, policy.name
        assert sum(p.cost_usd for p in run.placements) == 0
        assert ids.count("plan") == 30, f"{policy.name} comes back after each reset"
        lag = measure(run)
        if isinstance(policy, FallbackOn429):
            assert lag.max_lag_requests > 0, f"{policy.name} comes back late"
        else:
            # A window past its reset passes even the strict ladder (it is tried, not
            # refused as stale): the cached reading benches the plan only as long as the
            # cache it was read into lasts.
            assert lag.max_lag_seconds <= policy.ttl_s, f"{policy.name} comes back within its TTL"
