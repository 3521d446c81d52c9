"""The simulated upstreams' prompt caches over HTTP, read by the official SDKs: usage
fields in replies and streams, per-credential caches, the clock, and the quota charge."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from rungway.sim import Scenario, SimUpstream
from rungway.sim.pool import SimPool

from .conftest import CLAUDE_CODE_HEADERS, request
from .test_antigravity import antigravity_scenario, call, envelope

START = 1_790_000_000.0
PLAN_TOKEN = "sk-ant-oat01-cache-plan"
OPENAI_KEY = "sk-cache-openai"
GEMINI_KEY = "AIza-cache-gemini"
SYSTEM = "You are a careful coding agent. " * 400  # about 3200 tokens


def scenario(api: str, token: str, **extra: Any) -> Scenario:
    models = {
        "anthropic": [{"id": "claude-sonnet-4-5"}],
        "openai": [{"id": "gpt-5"}],
        "responses": [{"id": "gpt-5"}],
        "gemini": [{"id": "gemini-2.5-flash"}],
    }[api]
    auth = {"kind": "x-api-key" if api == "gemini" else "bearer", "token": token}
    return Scenario.model_validate(
        {
            "name": f"cache-{api}",
            "api": api,
            "auth": auth,
            "models": models,
            "clock": {"start": START},
            "response": {"output_tokens": 12, "chunk_tokens": 4},
            **extra,
        }
    )


@pytest.fixture(scope="module")
def plan_sim() -> Iterator[SimUpstream]:
    plan = scenario(
        "anthropic",
        PLAN_TOKEN,
        quota_headers="anthropic-unified",
        windows=[{"name": "5h", "claim": "five_hour", "capacity": 1_000_000, "length_s": 18000}],
    )
    with SimUpstream(plan) as sim:
        yield sim


@pytest.fixture
def claude(plan_sim: SimUpstream) -> Iterator[anthropic.Anthropic]:
    plan_sim.reset()
    with anthropic.Anthropic(
        base_url=plan_sim.url,
        auth_token=PLAN_TOKEN,
        max_retries=0,
        default_headers=CLAUDE_CODE_HEADERS,
    ) as client:
        yield client


def claude_turn(client: anthropic.Anthropic, turns: list[str], *, stream: bool = False) -> Any:
    messages: list[Any] = []
    for index, turn in enumerate(turns):
        block: dict[str, Any] = {"type": "text", "text": turn}
        if index == len(turns) - 1:
            block["cache_control"] = {"type": "ephemeral"}
        messages.append({"role": "user" if index % 2 == 0 else "assistant", "content": [block]})
    system: Any = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    if not stream:
        return client.messages.create(
            model="claude-sonnet-4-5", max_tokens=64, system=system, messages=messages
        ).usage
    with client.messages.stream(
        model="claude-sonnet-4-5", max_tokens=64, system=system, messages=messages
    ) as events:
        for event in events:
            if event.type == "message_start":
                return event.message.usage
    raise AssertionError("no message_start")


def test_a_claude_plan_writes_then_reads_and_a_stream_reports_it_in_message_start(
    plan_sim: SimUpstream, claude: anthropic.Anthropic
) -> None:
    first = claude_turn(claude, ["Fix the failing test."])
    assert first.cache_read_input_tokens == 0
    assert first.cache_creation_input_tokens > 3000
    assert first.cache_creation is not None
    assert first.cache_creation.ephemeral_5m_input_tokens == first.cache_creation_input_tokens
    plan_sim.fake_clock.advance(60)
    second = claude_turn(claude, ["Fix the failing test.", "Done.", "Now run it."], stream=True)
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert second.cache_creation_input_tokens > 0
    tally = plan_sim.tally.total()
    assert tally.cache_read_tokens == second.cache_read_input_tokens


def _moved(usage: Any) -> int:
    """Every token a Messages reply's usage says the request moved."""
    return int(
        usage.input_tokens
        + usage.cache_creation_input_tokens
        + usage.cache_read_input_tokens
        + usage.output_tokens
    )


def test_a_plan_window_counts_every_token_cache_reads_included(
    plan_sim: SimUpstream, claude: anthropic.Anthropic
) -> None:
    first = claude_turn(claude, ["Fix the failing test."])
    second = claude_turn(claude, ["Fix the failing test."])
    assert second.cache_read_input_tokens > 0
    assert plan_sim.state().windows[0].used == _moved(first) + _moved(second)


def test_an_api_keys_input_window_leaves_cache_reads_out() -> None:
    metered = scenario(
        "anthropic",
        "sk-ant-api03-cache",
        quota_headers="anthropic-apikey",
        windows=[
            {"name": "input-tokens", "unit": "input_tokens", "capacity": 10**6, "length_s": 60}
        ],
    )
    metered = metered.model_copy(
        update={"auth": metered.auth.model_copy(update={"kind": "x-api-key"})}
    )
    with (
        SimUpstream(metered) as sim,
        anthropic.Anthropic(
            base_url=sim.url,
            api_key="unused",
            max_retries=0,
            # This SDK sends `api_key` as a bearer token; the sim's key goes as `x-api-key`.
            default_headers={"x-api-key": "sk-ant-api03-cache"},
        ) as client,
    ):
        first = claude_turn(client, ["Fix the failing test."])
        second = claude_turn(client, ["Fix the failing test."])
        used = sim.state().windows[0].used
    assert second.cache_read_input_tokens > 0
    # Input and cache writes count toward input tokens per minute; reads do not (A1).
    assert used == sum(
        usage.input_tokens + usage.cache_creation_input_tokens for usage in (first, second)
    )


def test_the_cache_expires_after_five_idle_minutes_on_the_sims_clock(
    plan_sim: SimUpstream, claude: anthropic.Anthropic
) -> None:
    claude_turn(claude, ["Fix the failing test."])
    plan_sim.fake_clock.advance(301)
    late = claude_turn(claude, ["Fix the failing test."])
    assert late.cache_read_input_tokens == 0
    assert late.cache_creation_input_tokens > 3000


def test_another_account_of_the_same_plan_has_its_own_cache() -> None:
    pool = scenario(
        "anthropic", PLAN_TOKEN, quota_headers="anthropic-unified", pool={"accounts": 2}
    )
    with SimPool(pool) as sims:
        reads = []
        for account, sim in enumerate(sims, start=1):
            with anthropic.Anthropic(
                base_url=sim.url,
                auth_token=f"{PLAN_TOKEN}-{account}",
                max_retries=0,
                default_headers=CLAUDE_CODE_HEADERS,
            ) as client:
                reads.append(claude_turn(client, ["Fix the failing test."]).cache_read_input_tokens)
        with anthropic.Anthropic(
            base_url=sims.urls[0],
            auth_token=f"{PLAN_TOKEN}-1",
            max_retries=0,
            default_headers=CLAUDE_CODE_HEADERS,
        ) as client:
            reads.append(claude_turn(client, ["Fix the failing test."]).cache_read_input_tokens)
    assert reads[0] == reads[1] == 0
    assert reads[2] > 3000


@pytest.fixture(scope="module")
def chat_sim() -> Iterator[SimUpstream]:
    with SimUpstream(scenario("openai", OPENAI_KEY)) as sim:
        yield sim


@pytest.fixture(scope="module")
def responses_sim() -> Iterator[SimUpstream]:
    with SimUpstream(scenario("responses", OPENAI_KEY)) as sim:
        yield sim


def test_openai_chat_reports_cached_tokens_in_128_token_steps(chat_sim: SimUpstream) -> None:
    chat_sim.reset()
    messages: list[Any] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Fix the failing test."},
    ]
    with openai.OpenAI(base_url=f"{chat_sim.url}/v1", api_key=OPENAI_KEY, max_retries=0) as client:
        first = client.chat.completions.create(model="gpt-5", messages=messages).usage
        messages += [
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": "Now run it."},
        ]
        stream = client.chat.completions.create(
            model="gpt-5", messages=messages, stream=True, stream_options={"include_usage": True}
        )
        second = [chunk.usage for chunk in stream if chunk.usage is not None][-1]
    assert first is not None
    assert first.prompt_tokens_details is not None
    assert first.prompt_tokens_details.cached_tokens == 0
    assert second.prompt_tokens_details is not None
    cached = second.prompt_tokens_details.cached_tokens
    assert cached is not None
    assert cached >= 1024
    assert cached % 128 == 0
    assert cached <= first.prompt_tokens < second.prompt_tokens


def test_openai_responses_reports_cached_input_tokens(responses_sim: SimUpstream) -> None:
    responses_sim.reset()
    with openai.OpenAI(
        base_url=f"{responses_sim.url}/v1", api_key=OPENAI_KEY, max_retries=0
    ) as client:
        first = client.responses.create(model="gpt-5", instructions=SYSTEM, input="Fix it.")
        second = client.responses.create(model="gpt-5", instructions=SYSTEM, input="Run it.")
    assert first.usage is not None
    assert second.usage is not None
    assert first.usage.input_tokens_details.cached_tokens == 0
    assert second.usage.input_tokens_details.cached_tokens >= 1024


def test_gemini_reports_implicit_cache_hits_in_cached_content_token_count() -> None:
    with SimUpstream(scenario("gemini", GEMINI_KEY)) as sim:
        body = {
            "systemInstruction": {"parts": [{"text": SYSTEM}]},
            "contents": [{"role": "user", "parts": [{"text": "Fix the failing test."}]}],
        }
        path = "/v1beta/models/gemini-2.5-flash:generateContent"
        headers = {"x-goog-api-key": GEMINI_KEY, "content-type": "application/json"}
        first = request(sim.url, "POST", path, body, headers).json()["usageMetadata"]
        second = request(sim.url, "POST", path, body, headers).json()["usageMetadata"]
    assert "cachedContentTokenCount" not in first
    assert 3000 < second["cachedContentTokenCount"] < second["promptTokenCount"]
    assert second["promptTokenCount"] == first["promptTokenCount"]


def test_an_antigravity_login_reads_its_implicit_cache_inside_the_envelope() -> None:
    inner = {
        "systemInstruction": {"parts": [{"text": SYSTEM}]},
        "contents": [{"role": "user", "parts": [{"text": "Fix the failing test."}]}],
    }
    with SimUpstream(antigravity_scenario()) as sim:
        first = call(sim, "generateContent", envelope(request=inner)).json()
        second = call(sim, "generateContent", envelope(request=inner)).json()
    assert "cachedContentTokenCount" not in first["response"]["usageMetadata"]
    usage = second["response"]["usageMetadata"]
    assert 3000 < usage["cachedContentTokenCount"] < usage["promptTokenCount"]
