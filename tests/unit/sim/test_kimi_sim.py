"""The simulated Kimi Code plan: both APIs under `/coding` over one plan, its usage endpoint
read back by the gateway's own reader, and its 403s under the fake clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from rungway.adapters.kimi_code.adapter import KimiCodeAdapter
from rungway.protocol.failures import FailureClass
from rungway.quota.kimi import read_kimi_usage
from rungway.routing.snapshot import WindowStatus
from rungway.sim import Scenario, SimUpstream, builtin_scenario, load_scenario

from .conftest import RawResponse, chat_body, request

KEY = "sk-kimi-sim-plan-key"
MESSAGES = "/coding/v1/messages"
CHAT = "/coding/v1/chat/completions"
USAGES = "/coding/v1/usages"
ANTHROPIC = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
OPENAI = {"authorization": f"Bearer {KEY}"}


@pytest.fixture
def kimi() -> Iterator[SimUpstream]:
    with SimUpstream(load_scenario(builtin_scenario("kimi-plan"))) as sim:
        yield sim


def _message(sim: SimUpstream, headers: dict[str, str] = ANTHROPIC) -> RawResponse:
    body = {
        "model": "kimi-for-coding",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "Hello"}],
    }
    return request(sim.url, "POST", MESSAGES, body, headers)


def _usages(sim: SimUpstream) -> RawResponse:
    return request(sim.url, "GET", USAGES, None, OPENAI)


def test_both_apis_serve_the_plan_and_draw_on_one_window(kimi: SimUpstream) -> None:
    message = _message(kimi)
    assert message.status == 200
    assert message.json()["type"] == "message"
    chat = request(kimi.url, "POST", CHAT, chat_body(model="kimi-for-coding"), OPENAI)
    assert chat.status == 200
    assert chat.json()["object"] == "chat.completion"
    assert kimi.tally.by_model()["kimi-for-coding"].requests == 2
    windows = {window.name: window for window in kimi.state().windows}
    assert windows["5h"].used > 0


def test_the_usage_endpoint_reads_back_as_the_plan_windows(kimi: SimUpstream) -> None:
    kimi.set_window_used("5h", 15000)
    response = _usages(kimi)
    assert response.status == 200
    reading = read_kimi_usage(response.body, now=kimi.clock.now())
    windows = {window.name: window for window in reading.windows}
    assert windows["5h"].used_percent == pytest.approx(50.0)
    assert windows["5h"].resets_at == pytest.approx(kimi.clock.now() + 18000, abs=1)
    assert windows["7d"].used_percent == 0.0
    # No booster wallet in the scenario: past the quota the plan stops.
    assert reading.overage_permitted is False


def test_a_spent_window_is_a_403_the_adapter_reads_as_quota(kimi: SimUpstream) -> None:
    kimi.set_window_used("7d", 150000)
    response = _message(kimi)
    assert response.status == 403
    assert response.json()["error"]["type"] == "access_terminated_error"
    failure = KimiCodeAdapter().classify_failure(403, {}, response.body)
    assert failure.kind is FailureClass.QUOTA_EXHAUSTED
    assert "weekly (7-day)" in failure.message
    windows = read_kimi_usage(_usages(kimi).body, now=kimi.clock.now()).windows
    assert {w.name: w.status for w in windows}["7d"] is WindowStatus.REJECTED
    chat = request(kimi.url, "POST", CHAT, chat_body(model="kimi-for-coding"), OPENAI)
    assert chat.status == 403


def test_the_window_comes_back_after_its_reset(kimi: SimUpstream) -> None:
    kimi.set_window_used("5h", 30000)
    assert _message(kimi).status == 403
    assert "5-hour" in _message(kimi).json()["error"]["message"]
    kimi.fake_clock.advance(18001)
    assert _message(kimi).status == 200


def test_the_refused_platform_is_a_terms_refusal(kimi: SimUpstream) -> None:
    response = _message(kimi, {**ANTHROPIC, "x-msh-platform": "kimi_code_cli"})
    assert response.status == 403
    failure = KimiCodeAdapter().classify_failure(403, {}, response.body)
    assert failure.kind is FailureClass.TERMS
    assert kimi.tally.by_model() == {}


def test_a_wrong_key_is_kimis_401(kimi: SimUpstream) -> None:
    response = _message(kimi, {**ANTHROPIC, "x-api-key": "sk-wrong"})
    assert response.status == 401
    assert response.json()["error"]["type"] == "invalid_authentication_error"
    assert _usages_with(kimi, "sk-wrong").status == 401


def _usages_with(sim: SimUpstream, key: str) -> RawResponse:
    return request(sim.url, "GET", USAGES, None, {"authorization": f"Bearer {key}"})


def test_a_booster_wallet_serves_past_the_spent_plan_and_reports_itself() -> None:
    raw = yaml.safe_load(builtin_scenario("kimi-plan").read_text(encoding="utf-8"))
    raw["kimi"] = {"booster_cents": 350.0, "monthly_cap_cents": 20000}
    with SimUpstream(Scenario.model_validate(raw)) as sim:
        sim.set_window_used("5h", 30000)
        assert _message(sim).status == 200
        reading = read_kimi_usage(_usages(sim).body, now=sim.clock.now())
        assert reading.overage_permitted is True
        # Served past it, the window still reads spent: the wallet is paying.
        assert {w.name: w.used_percent for w in reading.windows}["5h"] == 100.0
        wallet = _usages(sim).json()["boosterWallet"]
        assert wallet["balance"]["amountLeft"] == "350000000"
