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

from .conftest import subscription_scenario


def test_the_builtin_scenarios_ship_and_load() -> None:
    assert builtin_scenario_names() == [
        "anthropic-api",
        "antigravity",
        "cheap-openai",
        "claude-plan",
        "claude-pool",
        "codex-plan",
        "copilot-seat",
        "gemini-api",
        "gemini-code-assist",
        "glm-plan",
        "kimi-plan",
        "local-ollama",
        "minimax-plan",
        "openrouter",
    ]
    for name in builtin_scenario_names():
        assert load_scenario(builtin_scenario(name)).name == name
        # Each file says what it simulates before anything else.
        assert builtin_scenario(name).read_text(encoding="utf-8").startswith("# ")


def test_claude_plan_is_an_oauth_plan_with_a_short_session_window() -> None:
    subscription = load_scenario(builtin_scenario("claude-plan"))
    assert (subscription.api, subscription.quota_headers) == ("anthropic", "anthropic-unified")
    assert subscription.usage_endpoint == "claude"
    assert (subscription.auth.kind, subscription.auth.token) == ("bearer", "sk-ant-oat01-sim-plan")
    assert [model.id for model in subscription.models] == ["claude-sonnet-4-5", "claude-haiku-4-5"]
    five_hour = subscription.windows[0]
    assert (five_hour.name, five_hour.claim, five_hour.length_s) == ("5h", "five_hour", 180)
    assert subscription.clock.start is None
    assert isinstance(SimUpstream(subscription).clock, SystemClock)


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


def test_provider_plan_scenarios_serve_their_usage_endpoints() -> None:
    codex = load_scenario(builtin_scenario("codex-plan"))
    assert (codex.quota_headers, codex.usage_endpoint) == ("codex", "codex")
    assert codex.codex_settings is not None
    assert codex.codex_settings.plan_type == "plus"
    assert [(w.name, w.length_s) for w in codex.windows] == [("5h", 18000), ("7d", 604800)]

    copilot = load_scenario(builtin_scenario("copilot-seat"))
    assert (copilot.usage_endpoint, copilot.auth.token) == ("copilot", "gho_sim-copilot-seat")
    assert copilot.copilot_settings is not None
    assert copilot.copilot_settings.overage_permitted is False
    premium = copilot.premium_window()
    assert premium is not None
    assert (premium.unit, premium.capacity) == ("requests", 300)
    assert {model.id for model in copilot.models} == {"gpt-4.1", "claude-sonnet-4.5"}

    gemini = load_scenario(builtin_scenario("gemini-code-assist"))
    assert (gemini.api, gemini.usage_endpoint) == ("code-assist", "gemini")
    scoped = {w.model for w in gemini.windows if w.length_s == 86400}
    assert scoped == {"gemini-2.5-pro", "gemini-2.5-flash"}

    openrouter = load_scenario(builtin_scenario("openrouter"))
    assert openrouter.usage_endpoint == "openrouter"
    assert openrouter.credit_settings is not None
    assert openrouter.credit_settings.limit == 5.0
    free = openrouter.model("meta-llama/llama-3.3-70b-instruct:free")
    assert free is not None
    assert (free.input_per_mtok, free.output_per_mtok) == (0, 0)


def test_usage_endpoint_defaults_to_claude_only_for_plan_logins() -> None:
    assert subscription_scenario().usage_endpoint == "claude"
    apikey = _with(auth={"kind": "x-api-key", "token": "k"})
    del apikey["usage_endpoint"]
    assert Scenario.model_validate(apikey).usage_endpoint == "none"
    opted_out = Scenario.model_validate(_with(usage_endpoint="none"))
    assert opted_out.usage_endpoint == "none"
    assert load_scenario(builtin_scenario("cheap-openai")).usage_endpoint == "none"


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
    raw = subscription_scenario().model_dump(mode="json")
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
        _with(usage_endpoint="codex"),
        _with(api="openai", usage_endpoint="claude"),
        _with(copilot={"plan": "individual"}),
        _with(credits={"limit": 5}),
        _with(codex={"plan_type": "pro"}),
        _with(usage_endpoint="none", copilot={}),
        _with(
            api="openai",
            usage_endpoint="copilot",
            copilot={"window": "5h"},  # a tokens window cannot be the premium one
        ),
        _with(
            api="openai",
            usage_endpoint="openrouter",
            credits={"limit": -1},
        ),
        _with(models=[{"id": "m", "input_per_mtok": -1}]),
        _with(surprise=True),
    ],
)
def test_invalid_scenarios_are_rejected(raw: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Scenario.model_validate(raw)


def test_scenarios_are_frozen() -> None:
    scenario = subscription_scenario()
    with pytest.raises(ValidationError):
        scenario.name = "changed"
