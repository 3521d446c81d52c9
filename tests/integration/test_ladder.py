"""The ladder through the real gateway: auto/thrifty escalates, auto/subscription never bills.

In the session's upstreams, `plan` is a Claude plan (rung 0), `api` an Anthropic API key
serving the same model (premium: its list price is above $1/M input), and `cheap` and
`backup` serve deepseek-chat (cheap).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from rungway.clock import FakeClock
from rungway.routing.snapshot import ConnectionState, QuotaWindow, WindowStatus
from rungway.sim import (
    DisconnectFault,
    HttpErrorFault,
    QuotaExhaustedFault,
    SimUpstream,
    StreamErrorFault,
)
from tests.integration.conftest import (
    CLAUDE_CODE_HEADERS,
    START,
    StartGateway,
    Upstreams,
    with_a_widened_plan,
)

HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]


@dataclass
class Readings:
    """A state source the test controls: quota readings as the quota work will supply them."""

    states: dict[str, ConnectionState] = field(default_factory=dict)

    def connection_states(self, now: float) -> Mapping[str, ConnectionState]:
        return self.states


def _subscription_reading(
    used: float, *, status: WindowStatus = WindowStatus.ALLOWED
) -> ConnectionState:
    return ConnectionState(
        windows=(QuotaWindow("5h", used, START + 3600, START - 1, status=status),)
    )


def _claude(url: str) -> anthropic.Anthropic:
    """Claude Code, the one client the plan serves: these tests are about the ladder."""
    return anthropic.Anthropic(
        base_url=url, api_key="unused", max_retries=0, default_headers=CLAUDE_CODE_HEADERS
    )


def _openai(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def test_thrifty_serves_from_the_plan_first(start_gateway: StartGateway, sims: Upstreams) -> None:
    gateway = start_gateway()
    raw = _claude(gateway.url).messages.with_raw_response.create(
        model="auto/thrifty", max_tokens=64, messages=HELLO
    )
    assert raw.headers["x-rungway-connection"] == "plan"
    assert raw.headers["x-rungway-rung"] == "subscription"
    assert sims.subscription.requests[-1].body["model"] == "claude-sonnet-4-5"
    (row,) = gateway.rows()
    assert row["rung"] == "subscription"
    plan = row["plan"]
    assert plan["ladder"] == "thrifty"
    # Connections of either API are candidates: the engine translates between them.
    assert [c["rung"] for c in plan["candidates"]][:2] == ["subscription", "cheap"]
    assert plan["skipped"] == []


def test_thrifty_escalates_within_one_request_when_the_plan_is_spent(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    sims.subscription.push_fault(QuotaExhaustedFault(window="5h"))
    with _claude(gateway.url).messages.stream(
        model="auto", max_tokens=64, messages=HELLO
    ) as stream:
        assert len("".join(stream.text_stream).split()) == 24
        assert stream.response.headers["x-rungway-rung"] == "cheap"
    (row,) = gateway.rows()
    # One rung up: the cheap OpenAI-compatible provider, through translation.
    assert (row["connection_id"], row["rung"]) == ("cheap", "cheap")
    assert [(a["connection_id"], a["outcome"]) for a in row["attempts"]] == [
        ("plan", "quota_exhausted")
    ]


def test_thrifty_honours_a_zero_budget(start_gateway: StartGateway, sims: Upstreams) -> None:
    gateway = start_gateway(ladder={"rung_budget_usd": {"cheap": 0, "premium": 0}})
    sims.subscription.push_fault(QuotaExhaustedFault(window="5h"))
    with pytest.raises(anthropic.RateLimitError):
        _claude(gateway.url).messages.create(model="auto/thrifty", max_tokens=64, messages=HELLO)
    for sim in (sims.api, sims.cheap, sims.backup):
        assert sim.requests == [], "the paid rungs have budgets of 0"
    (row,) = gateway.rows()
    assert any(s["reason"] == "budget_disabled" for s in row["plan"]["skipped"])


def test_thrifty_on_the_openai_ingress_uses_the_cheap_rung_and_its_budget(
    start_gateway: StartGateway, sims: Upstreams, any_client_plan: SimUpstream, tmp_path: Path
) -> None:
    # An OpenAI client, kept off a Claude plan by its terms, would never find the plan spent:
    # the plan's connection is widened on purpose (`clients: any`) so the plan is asked.
    connections = with_a_widened_plan(sims, any_client_plan, tmp_path)
    gateway = start_gateway(connections=connections)
    any_client_plan.push_fault(QuotaExhaustedFault(window="5h"))
    raw = _openai(gateway.url).chat.completions.with_raw_response.create(
        model="auto/coding:thrifty", messages=HELLO
    )
    assert raw.headers["x-rungway-rung"] == "cheap"
    assert raw.headers["x-rungway-connection"] in {"cheap", "backup"}
    (row,) = gateway.rows()
    assert [(a["connection_id"], a["outcome"]) for a in row["attempts"]] == [
        ("plan", "quota_exhausted")
    ]
    # The plan's window stays spent; with the cheap rung closed the request goes premium.
    closed = start_gateway(
        connections=connections, ladder={"rung_budget_usd": {"cheap": 0, "premium": None}}
    )
    raw = _openai(closed.url).chat.completions.with_raw_response.create(
        model="auto/thrifty", messages=HELLO
    )
    assert raw.headers["x-rungway-rung"] == "premium"
    row = next(row for row in closed.rows() if row["rung"] == "premium")
    assert any(s["reason"] == "budget_disabled" for s in row["plan"]["skipped"])


def test_subscription_without_a_verified_reading_fails_closed(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    # No readings, and nothing to verify the plan with.
    gateway = start_gateway(state=Readings())
    with pytest.raises(anthropic.InternalServerError) as raised:
        _claude(gateway.url).messages.create(
            model="auto/subscription", max_tokens=64, messages=HELLO
        )
    assert raised.value.status_code == 503
    assert "quota_missing" in raised.value.message
    assert "not_subscription" in raised.value.message
    assert all(sim.requests == [] for sim in sims.all())
    # Recorded with its plan and nothing else: no connection, no cost.
    [row] = gateway.rows()
    assert (row["outcome"], row["status"], row["connection_id"], row["cost_usd"]) == (
        "subscription_unavailable",
        503,
        None,
        0.0,
    )
    assert {skip["reason"] for skip in row["plan"]["skipped"]} >= {
        "quota_missing",
        "not_subscription",
    }


def test_subscription_serves_a_verified_plan(start_gateway: StartGateway, sims: Upstreams) -> None:
    readings = Readings({"plan": _subscription_reading(40.0)})
    gateway = start_gateway(state=readings, clock=FakeClock(START))
    raw = _claude(gateway.url).messages.with_raw_response.create(
        model="auto/subscription", max_tokens=64, messages=HELLO
    )
    assert (raw.headers["x-rungway-connection"], raw.headers["x-rungway-rung"]) == (
        "plan",
        "subscription",
    )


def test_subscription_exhausted_plan_gets_429_with_the_reset(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    readings = Readings({"plan": _subscription_reading(99.0)})
    gateway = start_gateway(state=readings, clock=FakeClock(START))
    with pytest.raises(anthropic.RateLimitError) as raised:
        _claude(gateway.url).messages.create(
            model="auto/subscription", max_tokens=64, messages=HELLO
        )
    assert raised.value.response.headers["retry-after"] == "3600"
    assert "quota_exhausted" in raised.value.message
    body = raised.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert body["error"]["type"] == "rate_limit_error"
    assert body["error"]["code"] == "subscription_unavailable"
    assert "5h: 1% left" in body["error"]["message"]


@pytest.mark.parametrize(
    "fault",
    [
        HttpErrorFault(status=429, retry_after_s=30),
        QuotaExhaustedFault(window="5h"),
        HttpErrorFault(status=529),
        HttpErrorFault(status=500),
        DisconnectFault(after_events=1),
        StreamErrorFault(after_events=1),
    ],
    ids=lambda fault: fault.kind + str(getattr(fault, "status", "")),
)
def test_subscription_never_reaches_a_metered_upstream(
    start_gateway: StartGateway, sims: Upstreams, fault: Any
) -> None:
    readings = Readings({"plan": _subscription_reading(10.0)})
    gateway = start_gateway(state=readings, clock=FakeClock(START))
    sims.subscription.push_fault(fault)
    with (
        pytest.raises(anthropic.APIStatusError) as raised,
        _claude(gateway.url).messages.stream(
            model="auto/subscription", max_tokens=64, messages=HELLO
        ) as stream,
    ):
        "".join(stream.text_stream)
    assert raised.value.response.status_code in {429, 502, 503}
    assert raised.value.body["error"]["message"]  # type: ignore[index]
    for sim in (sims.api, sims.cheap, sims.backup):
        assert sim.requests == [], f"{sim.scenario.name} was reached by auto/subscription"
    # The OpenAI ingress reaches the same plan through translation (unless the fault left
    # it cooling down), and never anything metered. It too comes as Claude Code, the one
    # client the plan serves: any other client would skip the plan for its terms and never
    # put it to the test.
    on_openai = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        json={"model": "auto/subscription", "messages": HELLO},
        headers=CLAUDE_CODE_HEADERS,
    )
    if on_openai.status_code == 200:
        assert on_openai.headers["x-rungway-rung"] == "subscription"
    else:
        assert on_openai.json()["error"]["code"] == "subscription_unavailable"
    for sim in (sims.api, sims.cheap, sims.backup):
        assert sim.requests == []


def test_models_advertise_the_ladder_ids(start_gateway: StartGateway) -> None:
    gateway = start_gateway()
    ids = {model.id for model in _openai(gateway.url).models.list()}
    assert {"auto", "auto/subscription", "auto/thrifty", "auto/vision:subscription"} <= ids


def test_explain_prints_the_route_plan(start_gateway: StartGateway, sims: Upstreams) -> None:
    gateway = start_gateway()
    sims.subscription.push_fault(QuotaExhaustedFault(window="5h"))
    raw = _claude(gateway.url).messages.with_raw_response.create(
        model="auto/thrifty", max_tokens=64, messages=HELLO
    )
    request_id = raw.headers["x-rungway-request-id"]
    gateway.ledger.flush()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rungway",
            "explain",
            request_id[:12],
            "--ledger",
            str(gateway.ledger_path),
        ],
        capture_output=True,
        text=True,
        check=True,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert "served by cheap on rung cheap" in done.stdout
    assert "anthropic/claude-sonnet-4-5" in done.stdout
    assert "deepseek/deepseek-chat" in done.stdout
    assert "quota_exhausted" in done.stdout
