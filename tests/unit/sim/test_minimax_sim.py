"""The simulated MiniMax Token Plan: Messages under `/anthropic`, both `remains` endpoints
read back by the gateway's own reader, and the 2056 refusal under the fake clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from rungway.adapters.base import Connection
from rungway.adapters.minimax.adapter import MiniMaxAdapter
from rungway.protocol.auth import Auth
from rungway.protocol.failures import FailureClass
from rungway.quota.minimax import read_minimax_remains
from rungway.routing.snapshot import QuotaWindow, WindowStatus
from rungway.sim import Scenario, SimUpstream, builtin_scenario, load_scenario

from .conftest import RawResponse, request

KEY = {"authorization": "Bearer sk-cp-sim-minimax-plan-key", "anthropic-version": "2023-06-01"}
MESSAGES = "/anthropic/v1/messages"
TOKEN_PLAN = "/v1/token_plan/remains"
CODING_PLAN = "/v1/api/openplatform/coding_plan/remains"


@pytest.fixture
def minimax() -> Iterator[SimUpstream]:
    with SimUpstream(load_scenario(builtin_scenario("minimax-plan"))) as sim:
        yield sim


def _message(sim: SimUpstream, headers: dict[str, str] = KEY) -> RawResponse:
    body = {
        "model": "MiniMax-M3",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "Hello"}],
    }
    return request(sim.url, "POST", MESSAGES + "?beta=true", body, headers)


def _windows(sim: SimUpstream, path: str = TOKEN_PLAN) -> dict[str, QuotaWindow]:
    body = request(sim.url, "GET", path, None, KEY).body
    reading = read_minimax_remains(body, now=sim.clock.now(), counts_remaining=path == CODING_PLAN)
    return {window.name: window for window in reading.windows}


def test_messages_count_one_request_each_in_both_windows(minimax: SimUpstream) -> None:
    response = _message(minimax)
    assert response.status == 200
    assert response.json()["type"] == "message"
    used = {window.name: window.used for window in minimax.state().windows}
    assert used == {"5h": 1, "7d": 1}


def test_the_remains_body_reads_back_as_percent_windows(minimax: SimUpstream) -> None:
    minimax.set_window_used("5h", 2250)
    windows = _windows(minimax)
    five = windows["5h"]
    assert five.used_percent == pytest.approx(50.0)
    assert five.resets_at == pytest.approx(minimax.clock.now() + 18000, abs=1)
    assert windows["7d"].used_percent == pytest.approx(0.0, abs=1)


def test_the_counted_shape_means_used_on_one_endpoint_and_remaining_on_the_other() -> None:
    raw = yaml.safe_load(builtin_scenario("minimax-plan").read_text(encoding="utf-8"))
    raw["minimax"] = {"title": "Starter", "counts": True}
    with SimUpstream(Scenario.model_validate(raw)) as sim:
        sim.set_window_used("5h", 151)
        token = request(sim.url, "GET", TOKEN_PLAN, None, KEY).json()["model_remains"][0]
        coding = request(sim.url, "GET", CODING_PLAN, None, KEY).json()["model_remains"][0]
        assert token["current_interval_usage_count"] == 151
        assert coding["current_interval_usage_count"] == 4500 - 151
        for path in (TOKEN_PLAN, CODING_PLAN):
            five = _windows(sim, path)["5h"]
            assert five.used_percent == pytest.approx(100 * 151 / 4500)


def test_a_spent_window_is_a_2056_with_its_reset_until_the_clock_reaches_it(
    minimax: SimUpstream,
) -> None:
    minimax.set_window_used("5h", 4500)
    response = _message(minimax)
    assert response.status == 429
    assert response.json()["error"]["message"].endswith("(2056)")
    adapter = MiniMaxAdapter()
    assert adapter.classify_failure(429, {}, response.body).kind is FailureClass.QUOTA_EXHAUSTED
    connection = Connection("mm", "minimax-token-plan", Auth.APIKEY, None, minimax.url, frozenset())
    windows = adapter.error_windows(
        connection,
        status=429,
        headers={},
        body=response.body,
        model="MiniMax-M3",
        now=minimax.clock.now(),
    )
    assert windows[0].name == "5h"
    assert windows[0].resets_at == pytest.approx(minimax.clock.now() + 18000, abs=2)
    assert _windows(minimax)["5h"].status is WindowStatus.REJECTED
    minimax.fake_clock.advance(18001)
    assert _message(minimax).status == 200


def test_a_wrong_key_is_refused_on_messages_and_remains(minimax: SimUpstream) -> None:
    wrong = {**KEY, "authorization": "Bearer sk-api-payg"}
    response = _message(minimax, wrong)
    assert response.status == 401
    assert MiniMaxAdapter().classify_failure(401, {}, response.body).kind is FailureClass.AUTH
    remains = request(minimax.url, "GET", TOKEN_PLAN, None, wrong).json()
    assert remains["base_resp"]["status_code"] == 1004
