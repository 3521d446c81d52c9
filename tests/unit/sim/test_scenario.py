"""Scenario loading and validation, and the shipped scenarios."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from rungway.clock import FakeClock, SystemClock
from rungway.sim import (
    GarbageFault,
    Scenario,
    SimUpstream,
    StreamErrorFault,
    builtin_scenario,
    builtin_scenario_names,
    load_scenario,
)

from .conftest import plan_scenario


def test_the_four_demo_scenarios_ship_and_load() -> None:
    assert builtin_scenario_names() == [
        "anthropic-api",
        "cheap-openai",
        "claude-plan",
        "local-ollama",
    ]
    for name in builtin_scenario_names():
        assert load_scenario(builtin_scenario(name)).name == name


def test_claude_plan_is_an_oauth_plan_with_a_short_session_window() -> None:
    plan = load_scenario(builtin_scenario("claude-plan"))
    assert (plan.api, plan.quota_headers) == ("anthropic", "anthropic-unified")
    assert (plan.auth.kind, plan.auth.token) == ("bearer", "sk-ant-oat01-sim-plan")
    assert [model.id for model in plan.models] == ["claude-sonnet-4-5", "claude-haiku-4-5"]
    five_hour = plan.windows[0]
    assert (five_hour.name, five_hour.claim, five_hour.length_s) == ("5h", "five_hour", 180)
    assert plan.clock.start is None
    assert isinstance(SimUpstream(plan).clock, SystemClock)


def test_other_demo_scenarios_use_their_families_and_credentials() -> None:
    api = load_scenario(builtin_scenario("anthropic-api"))
    cheap = load_scenario(builtin_scenario("cheap-openai"))
    local = load_scenario(builtin_scenario("local-ollama"))
    assert (api.quota_headers, api.auth.kind, api.auth.token) == (
        "anthropic-apikey",
        "x-api-key",
        "sk-ant-api03-sim-premium",
    )
    assert (cheap.api, cheap.quota_headers, cheap.auth.token) == (
        "openai",
        "openai",
        "sk-sim-cheap",
    )
    assert {model.id for model in cheap.models} == {"deepseek-chat", "gpt-4.1-mini"}
    assert (local.auth.kind, local.quota_headers, local.windows) == ("none", "none", ())


def test_unknown_builtin_scenario_lists_the_available_ones() -> None:
    with pytest.raises(FileNotFoundError, match="claude-plan"):
        builtin_scenario("nope")


def test_yaml_with_clock_start_and_faults(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\napi: openai\nmodels: [{id: m}]\nclock: {start: 1000}\n"
        "faults:\n  - {kind: garbage}\n  - {kind: stream_error, after_events: 2, times: 3}\n",
        encoding="utf-8",
    )
    scenario = load_scenario(path)
    assert scenario.faults == (GarbageFault(), StreamErrorFault(after_events=2, times=3))
    sim = SimUpstream(scenario)
    assert isinstance(sim.clock, FakeClock)
    assert sim.clock.now() == 1000
    assert len(sim.state().faults) == 2


def _with(**changes: object) -> dict[str, object]:
    raw = plan_scenario().model_dump(mode="json")
    raw.update(changes)
    return raw


@pytest.mark.parametrize(
    "raw",
    [
        _with(auth={"kind": "bearer"}),
        _with(models=[]),
        _with(models=[{"id": "a"}, {"id": "a"}]),
        _with(windows=[{"name": "5h", "capacity": 1, "length_s": 1}] * 2),
        _with(windows=[{"name": "w", "capacity": 1, "length_s": 1, "model": "other"}]),
        _with(windows=[{"name": "w", "capacity": 0, "length_s": 1}]),
        _with(api="gemini"),
        _with(quota_headers="codex"),
        _with(surprise=True),
    ],
)
def test_invalid_scenarios_are_rejected(raw: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Scenario.model_validate(raw)


def test_scenarios_are_frozen() -> None:
    scenario = plan_scenario()
    with pytest.raises(ValidationError):
        scenario.name = "changed"
