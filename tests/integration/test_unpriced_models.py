"""A model without a list price cannot slip past a budget: it is skipped on a budgeted paid
rung, with the fix in the reason, until `prices:` gives it a price that holds and settles."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from rungway.sim import Scenario, SimUpstream
from tests.integration.conftest import CLAUDE, SUBSCRIPTION_TOKEN, StartGateway, Upstreams

HOUSE = "house-coder-1"
HOUSE_KEY = "sk-house-unpriced"
HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]
FIX = f"no list price for openai-compatible/{HOUSE}: add it under `prices:` in the config"


@pytest.fixture
def house() -> Iterator[SimUpstream]:
    scenario = Scenario.model_validate(
        {
            "name": "house",
            "api": "openai",
            "quota_headers": "none",
            "auth": {"kind": "bearer", "token": HOUSE_KEY},
            "models": [{"id": HOUSE}],
            "response": {"output_tokens": 24, "chunk_tokens": 4},
        }
    )
    with SimUpstream(scenario) as sim:
        yield sim


def _connections(sims: Upstreams, house: SimUpstream, folder: Path) -> list[dict[str, Any]]:
    (folder / "plan.secret").write_text(SUBSCRIPTION_TOKEN)
    (folder / "house.secret").write_text(HOUSE_KEY)
    return [
        {
            "id": "plan",
            "provider": "anthropic",
            "auth": "oauth",
            "credential": {"file": str(folder / "plan.secret")},
            "base_url": sims.subscription.url,
            "models": [CLAUDE],
        },
        {
            "id": "house",
            "provider": "openai-compatible",
            "auth": "apikey",
            "credential": {"file": str(folder / "house.secret")},
            "base_url": house.url + "/v1",
            "models": [HOUSE],
        },
    ]


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def test_an_unpriced_model_on_a_budgeted_rung_is_skipped_with_the_fix(
    start_gateway: StartGateway, sims: Upstreams, house: SimUpstream, tmp_path: Path
) -> None:
    gateway = start_gateway(
        connections=_connections(sims, house, tmp_path),
        ladder={"rung_budget_usd": {"cheap": 1.0, "premium": 1.0}},
    )
    with pytest.raises(openai.APIStatusError) as named:
        _client(gateway.url).chat.completions.create(model=HOUSE, messages=HELLO)
    assert named.value.status_code == 503
    assert FIX in named.value.message
    # The Claude plan's terms keep this client off it, and nothing is left to climb to.
    with pytest.raises(openai.APIStatusError) as laddered:
        _client(gateway.url).chat.completions.create(model="auto/thrifty", messages=HELLO)
    assert laddered.value.status_code == 503
    assert "plan: terms (terms: claude plans serve Claude Code only)" in laddered.value.message
    assert house.requests == [], "a budget cannot bind a model it cannot price"
    rows = gateway.rows()
    skips = [skip for row in rows if row["plan"] for skip in row["plan"]["skipped"]]
    assert {"reason": "unpriced", "detail": FIX, "rung": "premium"}.items() <= next(
        skip for skip in skips if skip["reason"] == "unpriced" and skip["connection"] is None
    ).items(), "the ladder's plan names the model, its rung and the fix"


def test_a_configured_price_holds_settles_and_binds_the_budget(
    start_gateway: StartGateway, sims: Upstreams, house: SimUpstream, tmp_path: Path
) -> None:
    prices = {f"openai-compatible/{HOUSE[:5]}*": {"input_per_mtok": 0.5, "output_per_mtok": 2}}
    gateway = start_gateway(
        connections=_connections(sims, house, tmp_path),
        ladder={"rung_budget_usd": {"cheap": 1.0, "premium": 0}},
        prices=prices,
    )
    raw = _client(gateway.url).chat.completions.with_raw_response.create(
        model=HOUSE, messages=HELLO, max_tokens=64
    )
    assert raw.headers["x-rungway-rung"] == "cheap", "priced at $0.5/M input: the cheap tier"
    usage = raw.parse().usage
    assert usage is not None
    (row,) = gateway.rows()
    expected = (usage.prompt_tokens * 0.5 + usage.completion_tokens * 2) / 1e6
    assert row["cost_usd"] == pytest.approx(expected, rel=1e-9)
    assert row["list_cost_usd"] == pytest.approx(expected, rel=1e-9)
    spend = httpx.get(f"{gateway.url}/admin/spend").json()
    (cheap,) = (rung for rung in spend["budgets"]["rungs"] if rung["rung"] == "cheap")
    assert cheap["spent_usd"] == pytest.approx(expected, rel=1e-9)
    # A limit the worst case cannot fit refuses the request: the price makes the budget bind.
    with pytest.raises(openai.RateLimitError) as refused:
        _client(gateway.url).chat.completions.create(
            model=HOUSE, messages=HELLO, max_tokens=1_000_000
        )
    assert "budget" in refused.value.message
    assert len([r for r in house.requests if r.path == "/v1/chat/completions"]) == 1
