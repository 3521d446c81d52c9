"""`GET /admin/spend` and `rungway spend`: the ledger's costs and savings, and budgets' use."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import anthropic
import httpx
import openai
import pytest
from typer.testing import CliRunner

from rungway.cli.main import app
from rungway.cli.spend import money

from .conftest import (
    CLAUDE,
    CLAUDE_CODE_HEADERS,
    DEEPSEEK,
    RunningGateway,
    StartGateway,
    Upstreams,
)

HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]
LAPTOP_KEY = "rw-integration-laptop"
CI_KEY = "rw-integration-ci"


def _claude(gateway: RunningGateway, key: str = "unused", model: str = "auto/thrifty") -> str:
    # Claude Code's client: the Claude plan serves no other.
    client = anthropic.Anthropic(
        base_url=gateway.url, api_key=key, max_retries=0, default_headers=CLAUDE_CODE_HEADERS
    )
    raw = client.messages.with_raw_response.create(model=model, max_tokens=64, messages=HELLO)
    return raw.headers["x-rungway-rung"]


def _deepseek(gateway: RunningGateway, key: str = "unused") -> str:
    client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0)
    raw = client.chat.completions.with_raw_response.create(model=DEEPSEEK, messages=HELLO)
    return raw.headers["x-rungway-rung"]


def _traffic(gateway: RunningGateway, sims: Upstreams, key: str = "unused") -> list[str]:
    """Requests on three rungs: the plan twice, the API key once, the cheap provider once."""
    rungs = [_claude(gateway, key), _claude(gateway, key)]
    rungs += [_claude(gateway, key, model=f"api/{CLAUDE}"), _deepseek(gateway, key)]
    return rungs


def _spend(gateway: RunningGateway, query: str = "", **headers: str) -> dict[str, Any]:
    response = httpx.get(f"{gateway.url}/admin/spend{query}", headers=headers)
    assert response.status_code == 200, response.text
    payload: dict[str, Any] = response.json()
    return payload


def _cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    done = CliRunner().invoke(app, ["spend", *args], env={"COLUMNS": "200", **(env or {})})
    return done.exit_code, done.output


def _expected_by_rung(gateway: RunningGateway) -> dict[str, dict[str, Any]]:
    fields = ("requests", "input_tokens", "output_tokens", "cost_usd", "list_cost_usd")
    totals: dict[str, dict[str, Any]] = defaultdict(
        lambda: dict.fromkeys((*fields, "savings_usd"), 0)
    )
    for row in gateway.rows():
        total = totals[row["rung"] or "none"]
        total["requests"] += 1
        total["input_tokens"] += (
            row["input_tokens"] + row["cache_read_tokens"] + row["cache_write_tokens"]
        )
        total["output_tokens"] += row["output_tokens"]
        total["cost_usd"] += row["cost_usd"]
        if row["list_cost_usd"] is not None:
            total["list_cost_usd"] += row["list_cost_usd"]
            total["savings_usd"] += row["list_cost_usd"] - row["cost_usd"]
    return totals


def test_spend_by_rung_matches_the_ledger_in_the_endpoint_and_the_cli(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    assert _traffic(gateway, sims) == ["subscription", "subscription", "premium", "cheap"]

    payload = _spend(gateway, "?by=rung&period=month")
    assert (payload["by"], payload["period"]) == ("rung", "month")
    assert payload["since"] <= gateway.rows()[0]["started_at"] < payload["until"]
    rows = {row["group"]: row for row in payload["rows"]}
    assert list(rows) == ["subscription", "cheap", "premium"], "in ladder order"
    for rung, expected in _expected_by_rung(gateway).items():
        for field, value in expected.items():
            assert rows[rung][field] == pytest.approx(value), (rung, field)
    subscription = rows["subscription"]
    assert subscription["requests"] == 2
    assert subscription["cost_usd"] == 0.0
    assert subscription["list_cost_usd"] > 0
    assert subscription["savings_usd"] == pytest.approx(subscription["list_cost_usd"]), (
        "the plan saved it all"
    )
    assert rows["premium"]["cost_usd"] > 0
    assert rows["premium"]["savings_usd"] == pytest.approx(0.0)
    total = payload["total"]
    assert total["group"] == "total"
    assert total["requests"] == 4
    assert total["cost_usd"] == pytest.approx(sum(row["cost_usd"] for row in rows.values()))
    assert total["savings_usd"] == pytest.approx(
        subscription["savings_usd"] + rows["cheap"]["savings_usd"]
    )
    assert payload["budgets"] == {
        "period": "month",
        "since": payload["since"],
        "until": payload["until"],
        "rungs": [],
    }
    assert payload["keys"] == []
    # The default query is by rung over this month.
    assert _spend(gateway)["rows"] == payload["rows"]

    code, shown = _cli("--url", gateway.url, "--json")
    assert code == 0, shown
    assert json.loads(shown) == payload
    code, shown = _cli("--url", gateway.url)
    assert code == 0, shown
    assert "spend by rung, this month" in shown
    for rung in ("subscription", "cheap", "premium", "total"):
        assert rung in shown
    for amount in (total["cost_usd"], total["list_cost_usd"], total["savings_usd"]):
        assert money(amount) in shown
    assert "rung budgets" not in shown
    assert "client key budgets" not in shown


def test_spend_groups_by_connection_model_and_key(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    _traffic(gateway, sims)
    by_connection = _spend(gateway, "?by=connection&period=day")
    connections = {row["group"]: row["requests"] for row in by_connection["rows"]}
    assert connections == {"plan": 2, "api": 1, "cheap": 1}
    assert by_connection["rows"][0]["group"] == "api", "the dearest first"
    by_model = _spend(gateway, "?by=model&period=week")
    assert {row["group"]: row["requests"] for row in by_model["rows"]} == {
        "claude-sonnet-4-5": 3,
        DEEPSEEK: 1,
    }
    by_key = _spend(gateway, "?by=key")
    assert [(row["group"], row["requests"]) for row in by_key["rows"]] == [("(no key)", 4)]
    for payload in (by_connection, by_model, by_key):
        assert payload["total"]["cost_usd"] == pytest.approx(
            sum(row["cost_usd"] for row in gateway.rows())
        )
    code, shown = _cli("--url", gateway.url, "--by", "connection", "--period", "day")
    assert code == 0, shown
    assert "spend by connection, today" in shown
    assert all(connection in shown for connection in ("plan", "api", "cheap"))


def test_spend_shows_rung_and_key_budgets_used(
    start_gateway: StartGateway, sims: Upstreams, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNGWAY_IT_LAPTOP", LAPTOP_KEY)
    monkeypatch.setenv("RUNGWAY_IT_CI", CI_KEY)
    gateway = start_gateway(
        ladder={"rung_budget_usd": {"cheap": None, "premium": 5.0}, "budget_period": "week"},
        client_keys=[
            {
                "name": "laptop",
                "key": {"env": "RUNGWAY_IT_LAPTOP"},
                "budget_usd": 2.0,
                "budget_period": "day",
            },
            {"name": "ci", "key": {"env": "RUNGWAY_IT_CI"}},
        ],
    )
    _traffic(gateway, sims, key=LAPTOP_KEY)
    payload = _spend(gateway)
    premium_cost = sum(row["cost_usd"] for row in gateway.rows() if row["rung"] == "premium")
    assert premium_cost > 0
    budgets = payload["budgets"]
    assert budgets["period"] == "week"
    assert budgets["until"] - budgets["since"] == 7 * 86_400
    [premium] = budgets["rungs"]
    assert premium["rung"] == "premium"
    assert premium["budget_usd"] == 5.0
    assert premium["spent_usd"] == pytest.approx(premium_cost)
    assert premium["reserved_usd"] == 0.0
    assert premium["used_percent"] == pytest.approx(100 * premium_cost / 5.0)

    laptop, ci = payload["keys"]
    assert (laptop["key"], laptop["period"], laptop["budget_usd"]) == ("laptop", "day", 2.0)
    assert laptop["until"] - laptop["since"] == 86_400
    assert laptop["requests"] == 4
    assert laptop["cost_usd"] == pytest.approx(payload["total"]["cost_usd"])
    assert laptop["used_percent"] == pytest.approx(100 * laptop["cost_usd"] / 2.0)
    assert (ci["key"], ci["period"], ci["budget_usd"], ci["requests"]) == ("ci", "month", None, 0)
    assert ci["used_percent"] is None

    code, shown = _cli("--url", gateway.url, "--by", "key")
    assert code == 0, shown
    assert "rung budgets, this week" in shown
    assert "client key budgets" in shown
    assert money(laptop["cost_usd"]) in shown
    assert f"{laptop['used_percent']:.2g}%" in shown, "a tiny share still shows"


def test_bad_queries_get_clear_errors(start_gateway: StartGateway) -> None:
    gateway = start_gateway()
    bad_by = httpx.get(f"{gateway.url}/admin/spend?by=provider")
    assert bad_by.status_code == 400
    error = bad_by.json()["error"]
    assert error["type"] == "invalid_request"
    assert error["message"] == "`by` must be one of rung, connection, key, model; got 'provider'"
    bad_period = httpx.get(f"{gateway.url}/admin/spend?period=year")
    assert bad_period.status_code == 400
    assert "`period` must be one of day, week, month" in bad_period.text
    twice = httpx.get(f"{gateway.url}/admin/spend?by=rung&by=key")
    assert twice.status_code == 400
    unknown = httpx.get(f"{gateway.url}/admin/spend?group=rung")
    assert unknown.status_code == 400
    assert "unknown query parameter 'group'" in unknown.text
    assert httpx.post(f"{gateway.url}/admin/spend").status_code == 405
    code, shown = _cli("--url", gateway.url, "--by", "provider")
    assert code == 2, "the CLI refuses it before asking"
    assert "'provider' is not one of" in shown
