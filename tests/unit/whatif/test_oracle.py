"""The oracle on small cases solved by hand, each optimum worked out in a comment."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rungway.config import parse_settings
from rungway.pricing.overrides import PriceBook
from rungway.whatif.oracle import Oracle
from rungway.whatif.outcome import PolicyRun, World
from rungway.whatif.plans import PlanQuota, PlanWindow
from rungway.whatif.trace import Trace, TraceRequest

HOUR = 3600.0
DAY = 24 * HOUR
SONNET = "claude-sonnet-4-5"
HAIKU = "claude-haiku-4-5"
# Round prices, so every cost below is easy to check: $2 per million input tokens and $10
# per million output tokens for both models.
PRICES = {
    SONNET: {"input_per_mtok": 2, "output_per_mtok": 10},
    HAIKU: {"input_per_mtok": 2, "output_per_mtok": 10},
}


def world(
    *windows: PlanWindow,
    models: tuple[str, ...] = (SONNET,),
    keyless: bool = False,
    prices: dict[str, Any] | None = None,
) -> World:
    """A Claude login (the plan) and an Anthropic key serving `models`, maybe a local one."""
    connections: list[dict[str, Any]] = [
        {
            "id": "plan",
            "provider": "anthropic",
            "auth": "oauth",
            "credential": {"env": "PLAN_TOKEN"},
            "models": list(models),
        },
        {
            "id": "key",
            "provider": "anthropic",
            "auth": "apikey",
            "credential": {"env": "ANTHROPIC_API_KEY"},
            "models": list(models),
        },
    ]
    if keyless:
        connections.append(
            {
                "id": "local",
                "provider": "ollama",
                "auth": "none",
                "base_url": "http://127.0.0.1:11434",
                "models": list(models),
            }
        )
    config = parse_settings(
        {
            "connections": connections,
            "prices": PRICES if prices is None else prices,
            # No budget closes a rung, so `auto` ids see the key as named models do.
            "ladder": {"rung_budget_usd": {"cheap": None, "premium": None}},
        }
    )
    return World(config, {"plan": PlanQuota("plan", windows)}, PriceBook(config.prices))


def ask(
    at: float, *, input_tokens: int = 0, output_tokens: int = 0, model: str = SONNET
) -> TraceRequest:
    return TraceRequest(at, model, "anthropic_messages", input_tokens, output_tokens)


def run(trace: Trace, the_world: World) -> PolicyRun:
    reported: list[int] = []
    result = Oracle().run(trace, the_world, reported.append)
    assert sum(reported) == len(trace)
    return result


def paid(result: PolicyRun) -> float:
    return sum(placement.cost_usd for placement in result.placements)


def where(result: PolicyRun) -> list[str | None]:
    return [placement.connection_id for placement in result.placements]


def daily(capacity: float, unit: Any = "requests", model: str | None = None) -> PlanWindow:
    return PlanWindow("1d", DAY, capacity, unit, "fixed", model=model)


def test_one_window_takes_the_dearest_request() -> None:
    # Costs at the key: A 0.5 M input = $1, B 1.5 M input = $3, C 1 M input = $2. The plan
    # holds one request a day: it takes B, the dearest; A and C pay $1 + $2 = $3.
    trace = (
        ask(100, input_tokens=500_000),
        ask(200, input_tokens=1_500_000),
        ask(300, input_tokens=1_000_000),
    )
    result = run(trace, world(daily(1)))
    assert result.policy == "oracle"
    assert where(result) == ["key", "plan", "key"]
    assert result.bound_usd == pytest.approx(3.0)
    assert paid(result) == pytest.approx(3.0)
    assert [p.list_cost_usd for p in result.placements] == pytest.approx([1.0, 3.0, 2.0])
    assert [p.rung for p in result.placements] == [4, 0, 4]
    (use,) = result.window_use
    assert (use.connection_id, use.window, use.start, use.end) == ("plan", "1d", 0.0, DAY)
    assert (use.used, use.capacity) == (1.0, 1.0)


def test_a_token_window_is_filled_by_price_per_token() -> None:
    # The plan holds 1 M tokens a day. A window admits a request while it is not yet full
    # and counts it whole, so the admitted requests may weigh up to 1 M tokens plus the
    # heaviest (0.2 M): the LP's room is 1.2 M. Key prices: B is 0.1 M output tokens, $1
    # ($10 per M tokens); A, C, D, E, F and G are 0.2 M input tokens each, $0.40 ($2 per
    # M). Per token B is dearest and goes whole (0.1 M); then A, C, D, E and F (1.1 M in
    # all), and half of G. Bound: half of G, $0.20. G is split (half on the plan is not
    # more than half off it), so it goes to the key whole; in trace order A, B, C, D and E
    # bring the window to 0.9 M, F is admitted below 1 M and ends it at 1.1 M. The
    # placements pay G's $0.40.
    trace = (
        ask(10, input_tokens=200_000),
        ask(20, output_tokens=100_000),
        *(ask(30.0 + n, input_tokens=200_000) for n in range(5)),
    )
    result = run(trace, world(daily(1_000_000, "tokens")))
    assert result.bound_usd == pytest.approx(0.2)
    assert where(result) == ["plan"] * 6 + ["key"]
    assert paid(result) == pytest.approx(0.4)
    (use,) = result.window_use
    assert use.used == 1_100_000


def test_a_cost_window_weighs_each_request_at_its_list_price() -> None:
    # A cost window of $4 a day; A = $3, B = $2, C = $2, D = $2 at list price. The LP's
    # room is $4 plus the heaviest, $3: $7. Every request saves exactly its weight, so any
    # $7 of the $9 will do: the bound is $2. Ties go in trace order: A, B and C whole. As
    # a window admits them, A ($3) and B (admitted at $3, ending at $5) fit, C does not
    # (the window is past $4): C and D pay $4.
    trace = (
        ask(10, input_tokens=1_500_000),
        ask(20, input_tokens=1_000_000),
        ask(30, input_tokens=1_000_000),
        ask(40, input_tokens=1_000_000),
    )
    result = run(trace, world(daily(4, "cost")))
    assert result.bound_usd == pytest.approx(2.0)
    assert where(result) == ["plan", "plan", "key", "key"]
    assert paid(result) == pytest.approx(4.0)
    assert result.window_use[0].used == pytest.approx(5.0)


def test_nested_five_hour_and_seven_day_windows() -> None:
    # Key prices $1, $5, $4 at 0 h, 1 h, 2 h, then $3, $2 at 6 h, 7 h. The 5 h window holds
    # two requests and starts at first use (0 h, then 6 h); the 7 d window holds three.
    # Best: $5 and $4 from the first session, $3 from the second (the 7 d window allows
    # no fourth): saved $12 of $15, bound $1 + $2 = $3. The two windows are nested
    # intervals, so the LP's optimum is whole.
    costs = [1, 5, 4, 3, 2]
    hours = [0, 1, 2, 6, 7]
    trace = tuple(
        ask(1_000_000 + h * HOUR, input_tokens=c * 500_000)
        for h, c in zip(hours, costs, strict=True)
    )
    windows = (
        PlanWindow("5h", 5 * HOUR, 2, "requests", "first_use"),
        PlanWindow("7d", 7 * DAY, 3, "requests", "first_use"),
    )
    result = run(trace, world(*windows))
    assert result.bound_usd == pytest.approx(3.0)
    assert where(result) == ["key", "plan", "plan", "plan", "key"]
    spans = [(u.window, u.start - 1_000_000, u.end - 1_000_000, u.used) for u in result.window_use]
    assert spans == [
        ("5h", 0.0, 5 * HOUR, 2.0),
        ("5h", 6 * HOUR, 11 * HOUR, 1.0),
        ("7d", 0.0, 7 * DAY, 3.0),
    ]


def test_a_per_model_window_binds_only_its_model() -> None:
    # The plan's only window counts Sonnet requests, one a day. Haiku requests ($2 and
    # $4) are not counted: both go on the plan. Of Sonnet's $3 and $1 the plan takes $3:
    # the bound is $1.
    trace = (
        ask(10, input_tokens=1_000_000, model=HAIKU),
        ask(20, input_tokens=500_000, model=SONNET),
        ask(30, input_tokens=1_500_000, model=SONNET),
        ask(40, input_tokens=2_000_000, model=HAIKU),
    )
    result = run(trace, world(daily(1, model=SONNET), models=(SONNET, HAIKU)))
    assert result.bound_usd == pytest.approx(1.0)
    assert where(result) == ["plan", "key", "plan", "plan"]
    (use,) = result.window_use
    assert (use.window, use.used) == ("1d", 1.0)


def test_a_keyless_rung_makes_every_request_free() -> None:
    # A local model serves the same model for nothing: no request needs the plan, the
    # bound is $0 and every request goes to the local connection at cost 0 (its list
    # price is what the model's price says at the local provider: none, so 0).
    trace = tuple(ask(10.0 * n, input_tokens=1_000_000) for n in range(5))
    result = run(trace, world(daily(1), keyless=True))
    assert result.bound_usd == 0.0
    assert set(where(result)) == {"local"}
    assert [p.rung for p in result.placements] == [1] * 5
    assert paid(result) == 0.0


def test_an_empty_trace() -> None:
    # Nothing to place: nothing paid, no window instance opened.
    result = run((), world(daily(1)))
    assert result.placements == ()
    assert result.window_use == ()
    assert result.bound_usd == 0.0


def test_auto_ids_use_the_ladder_candidates() -> None:
    # `auto/thrifty` sees the plan and the key, as the named model does: one request a
    # day on the plan, the dearer ($3) of the two; the bound is $1.
    trace = (
        TraceRequest(10, "auto/thrifty", "openai_chat", 500_000, 0),
        TraceRequest(20, "auto/thrifty", "openai_chat", 1_500_000, 0),
    )
    result = run(trace, world(daily(1)))
    assert result.bound_usd == pytest.approx(1.0)
    assert where(result) == ["key", "plan"]


def test_a_plan_serving_two_models_counts_a_request_at_the_cheaper_one() -> None:
    # Haiku at $1 and Sonnet at $2 per million input tokens; `auto/thrifty` may use either
    # on the plan or the key. Cheapest fallback: Haiku on the key, $1 a request. The plan's
    # cost window holds $2 a day, and the LP's room is $2 plus the heaviest request. At
    # Haiku's price that is $3: all three fit, the bound is $0 (at Sonnet's, $4 holds two
    # of three and the bound would be $1). As the window admits them, two fit ($1, then
    # $2 reached) and the third pays $1.
    prices = {
        SONNET: {"input_per_mtok": 2, "output_per_mtok": 10},
        HAIKU: {"input_per_mtok": 1, "output_per_mtok": 5},
    }
    trace = tuple(
        TraceRequest(10.0 * n, "auto/thrifty", "openai_chat", 1_000_000, 0) for n in range(3)
    )
    result = run(trace, world(daily(2, "cost"), models=(SONNET, HAIKU), prices=prices))
    assert result.bound_usd == pytest.approx(0.0)
    assert where(result) == ["plan", "plan", "key"]
    assert paid(result) == pytest.approx(1.0)
    assert result.window_use[0].used == pytest.approx(2.0)
    # A per-model window on Sonnet leaves Haiku on the plan unbounded: nothing is paid.
    result = run(trace, world(daily(1, model=SONNET), models=(SONNET, HAIKU), prices=prices))
    assert result.bound_usd == pytest.approx(0.0)
    assert where(result) == ["plan"] * 3


def test_plan_only_requests_are_served_first_and_the_rest_refused() -> None:
    # `auto/subscription` never bills: with one request a day on the plan, the first of
    # the two is served and the second refused; nothing is paid, the bound is $0. A
    # Sonnet request the same day would save $2 on the plan, but a plan-only request is
    # served before money is saved, so the Sonnet request pays.
    trace = (
        TraceRequest(10, "auto/subscription", "anthropic_messages", 100, 10),
        TraceRequest(20, "auto/subscription", "anthropic_messages", 100, 10),
        ask(30, input_tokens=1_000_000),
    )
    result = run(trace, world(daily(1)))
    assert where(result)[0] == "plan"
    assert where(result)[1] is None
    assert result.placements[1].refusal is not None
    assert result.placements[1].refusal.startswith("plan_quota")
    assert where(result)[2] == "key"
    assert result.bound_usd == pytest.approx(2.0)


def test_an_unknown_model_is_refused_with_the_reason() -> None:
    result = run((ask(10, input_tokens=10, model="no-such-model"),), world(daily(1)))
    (placement,) = result.placements
    assert placement.connection_id is None
    assert placement.refusal is not None
    assert "no-such-model" in placement.refusal


UNITS = ("requests", "tokens", "cost")
PLAN_WINDOWS = st.lists(
    st.builds(
        PlanWindow,
        name=st.sampled_from(["a", "b", "c"]),
        length_s=st.sampled_from([5 * HOUR, DAY]),
        capacity=st.sampled_from([1.0, 2.0, 3.0, 1_000_000.0, 2.5]),
        unit=st.sampled_from(UNITS),
        alignment=st.sampled_from(["fixed", "first_use", "midnight"]),
        model=st.sampled_from([None, None, SONNET]),
    ),
    min_size=1,
    max_size=3,
    unique_by=lambda window: window.name,
)
TRACES = st.lists(
    st.builds(
        ask,
        st.integers(min_value=0, max_value=72).map(lambda hours: hours * HOUR / 2),
        input_tokens=st.integers(min_value=0, max_value=20).map(lambda n: n * 100_000),
        output_tokens=st.integers(min_value=0, max_value=4).map(lambda n: n * 50_000),
        model=st.sampled_from([SONNET, HAIKU]),
    ),
    max_size=14,
).map(lambda requests: tuple(sorted(requests, key=lambda request: request.at)))


def key_cost(request: TraceRequest) -> float:
    return (request.input_tokens * 2 + request.output_tokens * 10) / 1_000_000


def first_come(trace: Trace, windows: list[PlanWindow]) -> float:
    """What a policy pays that puts each request on the plan while no fixed window counting
    it is full yet, as a window admits requests: the oracle's bound is at or below it."""
    used: dict[tuple[str, float], float] = {}
    total = 0.0
    for request in trace:
        charges = []
        for window in windows:
            if window.model not in (None, request.model):
                continue
            weight = {"requests": 1.0, "tokens": float(request.tokens)}.get(
                window.unit, key_cost(request)
            )
            charges.append(((window.name, request.at // window.length_s), weight, window))
        if all(used.get(key, 0.0) < window.capacity for key, _, window in charges):
            for key, weight, _ in charges:
                used[key] = used.get(key, 0.0) + weight
        else:
            total += key_cost(request)
    return total


@settings(max_examples=60, deadline=None)
@given(trace=TRACES, windows=PLAN_WINDOWS)
def test_the_bound_is_below_every_whole_placement(trace: Trace, windows: list[PlanWindow]) -> None:
    result = run(trace, world(*windows, models=(SONNET, HAIKU)))
    assert result.bound_usd is not None
    always_key = sum(key_cost(request) for request in trace)
    assert result.bound_usd <= always_key + 1e-6
    assert result.bound_usd <= paid(result) + 1e-6
    assert paid(result) <= always_key + 1e-6
    heaviest = max((key_cost(request) for request in trace), default=0.0)
    heaviest = max([heaviest, 1.0, *(float(request.tokens) for request in trace)])
    for use in result.window_use:
        # A window admits its last request while not yet full, and counts it whole.
        assert use.used <= use.capacity + heaviest
    fixed = [replace(window, alignment="fixed") for window in windows]
    bound = run(trace, world(*fixed, models=(SONNET, HAIKU))).bound_usd
    assert bound is not None
    assert bound <= first_come(trace, fixed) + 1e-6


def test_without_the_solver_the_import_names_the_extra() -> None:
    # A base install has no scipy: importing the oracle says which extra brings it, so the
    # CLI can pass that on.
    script = (
        "import sys\n"
        "sys.modules['scipy'] = None\n"
        "try:\n"
        "    import rungway.whatif.oracle\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert "pip install 'rungway[whatif]'" in done.stdout
