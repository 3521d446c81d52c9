"""The oracle's bound against the replayed policies: no policy pays less on the same trace."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rungway.whatif.oracle import Oracle
from rungway.whatif.plans import PlanWindow
from rungway.whatif.policies import AlwaysKey, FallbackOn429, LadderPolicy, TtlCached
from rungway.whatif.trace import Trace, TraceRequest

from .test_oracle import DAY, HAIKU, HOUR, SONNET, ask, world

# Windows on a fixed grid (or at midnight): every policy sees the same window instances,
# so the bound holds against each of them, whatever it leaves idle.
WINDOWS = st.lists(
    st.builds(
        PlanWindow,
        name=st.sampled_from(["a", "b"]),
        length_s=st.sampled_from([5 * HOUR, DAY]),
        capacity=st.sampled_from([1.0, 2.0, 3.0, 600_000.0, 2.5]),
        unit=st.sampled_from(["requests", "tokens", "cost"]),
        alignment=st.sampled_from(["fixed", "midnight"]),
    ),
    min_size=1,
    max_size=2,
    unique_by=lambda window: window.name,
)
REQUESTS = st.lists(
    st.one_of(
        st.builds(
            ask,
            st.integers(min_value=0, max_value=96).map(lambda half_hours: half_hours * HOUR / 2),
            input_tokens=st.integers(min_value=1, max_value=10).map(lambda n: n * 100_000),
            output_tokens=st.integers(min_value=0, max_value=4).map(lambda n: n * 10_000),
            model=st.sampled_from([SONNET, HAIKU]),
        ),
        st.builds(
            TraceRequest,
            st.integers(min_value=0, max_value=96).map(lambda half_hours: half_hours * HOUR / 2),
            st.just("auto/thrifty"),
            st.just("openai_chat"),
            st.integers(min_value=1, max_value=10).map(lambda n: n * 100_000),
            st.integers(min_value=0, max_value=4).map(lambda n: n * 10_000),
        ),
    ),
    max_size=12,
).map(lambda requests: tuple(sorted(requests, key=lambda request: request.at)))
POLICIES = (LadderPolicy(), AlwaysKey(), FallbackOn429(), TtlCached())


@settings(max_examples=40, deadline=None)
@given(trace=REQUESTS, windows=WINDOWS)
def test_no_policy_pays_less_than_the_bound(trace: Trace, windows: list[PlanWindow]) -> None:
    the_world = world(*windows, models=(SONNET, HAIKU))
    bound = Oracle().run(trace, the_world, lambda count: None).bound_usd
    assert bound is not None
    for policy in POLICIES:
        run = policy.run(trace, the_world, lambda count: None)
        refused = [placement for placement in run.placements if placement.refusal is not None]
        assert not refused, (policy.name, refused)
        spent = sum(placement.cost_usd for placement in run.placements)
        assert bound <= spent + 1e-6, policy.name
