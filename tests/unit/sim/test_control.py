"""The /_sim control HTTP API and the Python control surface."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from rungway.clock import FakeClock, SystemClock
from rungway.sim import (
    DisconnectFault,
    SimUpstream,
    TimeoutFault,
    builtin_scenario,
    load_scenario,
)

from .conftest import ANTHROPIC_HEADERS, START, message_body, request, subscription_scenario


@pytest.fixture(scope="module")
def ollama() -> Iterator[SimUpstream]:
    """The shipped local-model scenario with faster pacing."""
    scenario = load_scenario(builtin_scenario("local-ollama"))
    paced = scenario.response.model_copy(
        update={"output_tokens": 10, "first_byte_ms": 60, "chunk_interval_ms": 5}
    )
    with SimUpstream(scenario.model_copy(update={"response": paced})) as sim:
        yield sim


def test_faults_can_be_queued_over_http(subscription_sim: SimUpstream) -> None:
    faults = [{"kind": "disconnect", "after_events": 2}, {"kind": "timeout", "delay_s": 5}]
    response = request(subscription_sim.url, "POST", "/_sim/faults", faults)
    assert response.status == 200
    assert response.json() == {"queued": 2}
    queued = [entry.fault for entry in subscription_sim.state().faults]
    assert queued == [DisconnectFault(after_events=2), TimeoutFault(delay_s=5)]
    bad = request(subscription_sim.url, "POST", "/_sim/faults", {"kind": "explode"})
    assert bad.status == 422


def test_clock_can_be_advanced_and_set_over_http(subscription_sim: SimUpstream) -> None:
    before = subscription_sim.fake_clock.now()
    advanced = request(subscription_sim.url, "POST", "/_sim/clock", {"advance_s": 90})
    assert advanced.status == 200
    assert advanced.json() == {"now": before + 90}
    target = before + 1000
    assert request(subscription_sim.url, "POST", "/_sim/clock", {"set": target}).json() == {
        "now": target
    }
    backwards = request(subscription_sim.url, "POST", "/_sim/clock", {"set": START - 1})
    assert backwards.status == 400
    both = request(subscription_sim.url, "POST", "/_sim/clock", {"set": target, "advance_s": 1})
    assert both.status == 400
    assert subscription_sim.fake_clock.now() == target


def test_state_reports_windows_tally_and_counts(subscription_sim: SimUpstream) -> None:
    request(subscription_sim.url, "POST", "/v1/messages", message_body(), ANTHROPIC_HEADERS)
    state = request(subscription_sim.url, "GET", "/_sim/state").json()
    assert state["scenario"] == "test-plan"
    assert state["fake_clock"] is True
    assert state["request_count"] == 1
    assert state["tally"] == {
        "claude-sonnet-4-5": {
            "requests": 1,
            "input_tokens": 13,
            "output_tokens": 24,
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
        }
    }
    five_hour = state["windows"][0]
    assert (five_hour["name"], five_hour["used"], five_hour["capacity"]) == ("5h", 37, 400)
    assert five_hour["reset_at"] == state["now"] + 18000
    assert [window["name"] for window in state["windows"]] == ["5h", "7d", "7d_oi"]


def test_recorded_requests_are_served_and_exclude_control_calls(
    subscription_sim: SimUpstream,
) -> None:
    request(
        subscription_sim.url, "POST", "/v1/messages?beta=true", message_body(), ANTHROPIC_HEADERS
    )
    recorded = request(subscription_sim.url, "GET", "/_sim/requests").json()
    assert len(recorded) == 1
    assert recorded[0]["path"] == "/v1/messages"
    assert recorded[0]["query"] == "beta=true"
    assert recorded[0]["headers"]["anthropic-version"] == "2023-06-01"
    assert recorded[0]["body"] == message_body()


def test_reset_empties_windows_tally_log_and_queue(subscription_sim: SimUpstream) -> None:
    request(subscription_sim.url, "POST", "/v1/messages", message_body(), ANTHROPIC_HEADERS)
    subscription_sim.push_fault(TimeoutFault(delay_s=1))
    assert request(subscription_sim.url, "POST", "/_sim/reset").json() == {"reset": True}
    state = subscription_sim.state()
    assert state.request_count == 0
    assert state.tally == {}
    assert state.faults == []
    assert all(window.used == 0 for window in state.windows)
    assert subscription_sim.requests == []


def test_unknown_control_route_is_404(subscription_sim: SimUpstream) -> None:
    assert request(subscription_sim.url, "GET", "/_sim/nothing").status == 404


def test_a_real_clock_sim_refuses_clock_control(ollama: SimUpstream) -> None:
    assert isinstance(ollama.clock, SystemClock)
    with pytest.raises(RuntimeError):
        _ = ollama.fake_clock
    response = request(ollama.url, "POST", "/_sim/clock", {"advance_s": 1})
    assert response.status == 409


def test_an_explicit_clock_wins_over_the_scenario() -> None:
    clock = FakeClock(START + 5)
    sim = SimUpstream(subscription_scenario(), clock=clock)
    assert sim.clock is clock
    assert sim.state().now == START + 5


def test_unauthenticated_upstream_paces_its_stream_and_sends_no_quota_headers(
    ollama: SimUpstream,
) -> None:
    body = {"model": "llama3.2", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    started = time.monotonic()
    response = request(ollama.url, "POST", "/v1/chat/completions", body, {"authorization": "x"})
    elapsed = time.monotonic() - started
    assert response.status == 200
    # 60 ms to the first byte, then 12 frames 5 ms apart (role, 10 words, finish; [DONE]).
    assert elapsed >= 0.06 + 11 * 0.005
    assert len(response.events()) == 13
    assert not any(name.lower().startswith("x-ratelimit") for name, _ in response.headers)

    body["stream"] = False
    started = time.monotonic()
    whole = request(ollama.url, "POST", "/v1/chat/completions", body)
    # A whole reply arrives when its last chunk would have: 60 ms + 9 gaps of 5 ms.
    assert time.monotonic() - started >= 0.06 + 9 * 0.005
    assert whole.json()["usage"]["completion_tokens"] == 10


def test_start_stop_and_context_manager() -> None:
    sim = SimUpstream(subscription_scenario())
    with pytest.raises(RuntimeError):
        _ = sim.url
    url = sim.start(port=0)
    assert url.startswith("http://127.0.0.1:")
    with pytest.raises(RuntimeError):
        sim.start()
    assert request(url, "GET", "/_sim/state").status == 200
    sim.stop()
    sim.stop()  # stopping twice is harmless
    with SimUpstream(subscription_scenario()) as again:
        assert request(again.url, "GET", "/_sim/state").status == 200


def test_credits_control_needs_an_upstream_with_credits(subscription_sim: SimUpstream) -> None:
    refused = request(subscription_sim.url, "POST", "/_sim/credits", {"remaining": 1})
    assert refused.status == 409
    assert "no credits" in refused.json()["error"]
    assert request(subscription_sim.url, "POST", "/_sim/credits", {"left": 1}).status == 400
    assert request(subscription_sim.url, "GET", "/_sim/state").json()["credits"] is None


def test_a_window_can_be_steered_to_a_level_over_http(subscription_sim: SimUpstream) -> None:
    steered = request(subscription_sim.url, "POST", "/_sim/windows", {"name": "5h", "used": 390})
    assert steered.status == 200
    assert (steered.json()["used"], steered.json()["remaining"]) == (390, 10)
    reply = request(subscription_sim.url, "POST", "/v1/messages", message_body(), ANTHROPIC_HEADERS)
    utilization = float(reply.header("anthropic-ratelimit-unified-5h-utilization") or 0)
    assert utilization > 0.97
    missing = request(subscription_sim.url, "POST", "/_sim/windows", {"name": "1h", "used": 1})
    assert missing.status == 404
    assert "windows: 5h" in missing.json()["error"]
    assert (
        request(subscription_sim.url, "POST", "/_sim/windows", {"name": "5h", "used": -1}).status
        == 400
    )
    assert request(subscription_sim.url, "POST", "/_sim/windows", {"name": "5h"}).status == 400
