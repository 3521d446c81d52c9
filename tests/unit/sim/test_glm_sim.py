"""The simulated GLM Coding Plan: its coding endpoint, its quota endpoint and Z.ai's 429
business codes under the fake clock, read back by the gateway's own GLM readers."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from rungway.cli.sim_upstream import connection_entry
from rungway.config import ConnectionConfig
from rungway.quota.glm import read_glm_error, read_glm_tools, read_glm_usage
from rungway.routing.snapshot import WindowStatus
from rungway.sim import SimUpstream, builtin_scenario, load_scenario

from .conftest import RawResponse, chat_body, message_body, request

KEY = {"authorization": "Bearer sim-glm-coding-plan-key"}
CHAT = "/api/coding/paas/v4/chat/completions"
QUOTA = "/api/monitor/usage/quota/limit"


@pytest.fixture
def glm() -> Iterator[SimUpstream]:
    with SimUpstream(load_scenario(builtin_scenario("glm-plan"))) as sim:
        yield sim


def _chat(sim: SimUpstream, headers: dict[str, str] = KEY) -> RawResponse:
    return request(sim.url, "POST", CHAT, chat_body(model="glm-5.2"), headers)


def _quota(sim: SimUpstream) -> RawResponse:
    return request(sim.url, "GET", QUOTA, None, KEY)


def test_the_coding_endpoint_answers_the_plan_key_in_openai_shape(glm: SimUpstream) -> None:
    response = _chat(glm)
    assert response.status == 200
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["usage"]["completion_tokens"] == 200
    listing = request(glm.url, "GET", "/api/coding/paas/v4/models", None, KEY)
    assert [model["id"] for model in listing.json()["data"]] == [
        "glm-5.2",
        "glm-4.7",
        "glm-4.5-air",
    ]


def test_a_wrong_key_and_the_general_endpoint_are_refused(glm: SimUpstream) -> None:
    assert _chat(glm, {"authorization": "Bearer nope"}).status == 401
    general = request(glm.url, "POST", "/api/paas/v4/chat/completions", chat_body(), KEY)
    assert general.status == 429
    assert general.json()["error"]["code"] == "1113"
    refused = request(glm.url, "GET", QUOTA, None, {"authorization": "Bearer nope"})
    assert refused.status == 401
    assert refused.json()["success"] is False


def test_the_quota_endpoint_reports_unstarted_windows_then_percent_used(glm: SimUpstream) -> None:
    now = glm.clock.now()
    fresh = _quota(glm)
    limits = fresh.json()["data"]["limits"]
    tokens = [limit for limit in limits if limit["type"] == "TOKENS_LIMIT"]
    assert [(t["unit"], t["number"]) for t in tokens] == [(3, 5), (6, 1)]
    assert all("nextResetTime" not in t for t in tokens)
    tools = read_glm_tools(fresh.body, now=now)
    assert tools is not None
    assert tools.used == 0

    glm.set_window_used("5h", 10000)
    windows = {w.name: w for w in read_glm_usage(_quota(glm).body, now=now).windows}
    assert windows["5h"].used_percent == 25.0
    assert windows["5h"].resets_at == pytest.approx(glm.state().window("5h").reset_at, abs=0.001)
    assert windows["7d"].used_percent == 0.0
    assert windows["7d"].resets_at is None


def test_a_spent_5h_window_answers_1308_with_its_utc8_reset_and_serves_again_after_it(
    glm: SimUpstream,
) -> None:
    glm.set_window_used("5h", 40000)
    now = glm.clock.now()
    refused = _chat(glm)
    assert refused.status == 429
    assert refused.json()["error"]["code"] == "1308"
    signal = read_glm_error(429, refused.body, now=now)
    (window,) = signal.windows
    reset_at = glm.state().window("5h").reset_at
    # The message names whole seconds of UTC+8 wall-clock time, never one short of the reset.
    assert window.name == "5h"
    assert window.resets_at is not None
    assert reset_at <= window.resets_at < reset_at + 1
    assert window.status is WindowStatus.REJECTED
    assert signal.terminal
    polled = {w.name: w for w in read_glm_usage(_quota(glm).body, now=now).windows}
    assert polled["5h"].status is WindowStatus.REJECTED

    glm.fake_clock.advance(reset_at - now + 1)
    assert _chat(glm).status == 200


def test_a_spent_week_answers_1310_with_an_iso_reset(glm: SimUpstream) -> None:
    glm.set_window_used("7d", 400000)
    refused = _chat(glm)
    assert refused.json()["error"]["code"] == "1310"
    (window,) = read_glm_error(429, refused.body, now=glm.clock.now()).windows
    assert window.name == "7d"
    assert window.resets_at == pytest.approx(glm.state().window("7d").reset_at, abs=1.0)


def test_the_printed_connection_reaches_the_sim_as_a_glm_plan(glm: SimUpstream) -> None:
    entry = connection_entry(glm.scenario, glm.url)
    assert (entry["provider"], entry["auth"]) == ("glm-coding", "apikey")
    connection = ConnectionConfig.model_validate(entry)
    assert connection.base_url is not None
    assert (
        request(
            glm.url,
            "POST",
            urlsplit(connection.base_url).path + "/chat/completions",
            chat_body(model="glm-5.2"),
            KEY,
        ).status
        == 200
    )


MESSAGES = "/api/anthropic/v1/messages?beta=true"
ANTHROPIC_KEY = {"x-api-key": "sim-glm-coding-plan-key", "anthropic-version": "2023-06-01"}


def test_the_anthropic_endpoint_serves_claude_code_on_the_same_plan(glm: SimUpstream) -> None:
    bearer = {**KEY, "anthropic-version": "2023-06-01"}
    for headers in (ANTHROPIC_KEY, bearer):
        answer = request(glm.url, "POST", MESSAGES, message_body(model="glm-5.2"), headers)
        assert answer.status == 200
        assert answer.json()["type"] == "message"
    assert glm.tally.total().requests == 2
    refused = {"authorization": "Bearer nope", "anthropic-version": "2023-06-01"}
    wrong = request(glm.url, "POST", MESSAGES, message_body(model="glm-5.2"), refused)
    assert wrong.status == 401
    glm.set_window_used("5h", 40000)
    spent = request(glm.url, "POST", MESSAGES, message_body(model="glm-5.2"), ANTHROPIC_KEY)
    assert spent.status == 429
    assert spent.json()["error"]["code"] == "1308"
