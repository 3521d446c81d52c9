"""The simulated Gemini Code Assist: its envelope, its methods, its quota (one state behind
generation and retrieveUserQuota) and Google's token refresh, over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from google.genai import types

from rungway.quota.errors import read_gemini_error
from rungway.sim import Scenario, SimUpstream, StreamErrorFault
from rungway.sim.oauth.token_spec import TokenFault
from rungway.sim.scenario import builtin_scenario, load_scenario

from .conftest import START, RawResponse, request

TOKEN = "ya29.sim-code-assist-test"
PROJECT = "test-project-42"
PRO = "gemini-2.5-pro"
FLASH = "gemini-2.5-flash"
REFRESH = "1//test-refresh"
CLIENT = {"client_id": "681255809395-test.apps.googleusercontent.com", "client_secret": "s"}


def code_assist_scenario() -> Scenario:
    """Code Assist with 3 requests a minute across models and 2 a day for Pro."""
    return Scenario.model_validate(
        {
            "name": "test-code-assist",
            "api": "code-assist",
            "usage_endpoint": "gemini",
            "auth": {"kind": "bearer", "token": TOKEN},
            "oauth": {"style": "google", "refresh_token": REFRESH},
            "code_assist": {"project": PROJECT},
            "models": [{"id": PRO}, {"id": FLASH}],
            "windows": [
                {"name": "rpm", "unit": "requests", "capacity": 3, "length_s": 60},
                {
                    "name": "pro-daily",
                    "unit": "requests",
                    "capacity": 2,
                    "length_s": 86400,
                    "model": PRO,
                },
            ],
            "clock": {"start": START},
            "response": {"output_tokens": 6, "chunk_tokens": 3},
        }
    )


@pytest.fixture(scope="module")
def _server() -> Iterator[SimUpstream]:
    with SimUpstream(code_assist_scenario()) as sim:
        yield sim


@pytest.fixture
def sim(_server: SimUpstream) -> SimUpstream:
    """The Code Assist sim, reset."""
    _server.reset()
    return _server


def call(
    sim: SimUpstream, method: str, body: object, token: str = TOKEN, query: str = ""
) -> RawResponse:
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    return request(sim.url, "POST", f"/v1internal:{method}{query}", body, headers)


def envelope(model: str = FLASH, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "project": PROJECT,
        "user_prompt_id": "prompt-1",
        "request": {
            "contents": [{"role": "user", "parts": [{"text": "Hello"}]}],
            "session_id": "session-1",
        },
    }
    body.update(overrides)
    return body


def test_generate_content_round_trips_the_envelope(sim: SimUpstream) -> None:
    response = call(sim, "generateContent", envelope())
    assert response.status == 200
    body = response.json()
    assert set(body) == {"response", "traceId"}
    reply = types.GenerateContentResponse.model_validate(body["response"])
    assert reply.text == sim.replies[-1].text
    assert reply.usage_metadata is not None
    assert reply.usage_metadata.candidates_token_count == 6


def test_stream_events_each_carry_the_envelope(sim: SimUpstream) -> None:
    response = call(sim, "streamGenerateContent", envelope(), query="?alt=sse")
    assert response.status == 200
    frames = response.body.split(b"\r\n\r\n")
    assert frames[-1] == b""
    events = [orjson.loads(frame.removeprefix(b"data: ")) for frame in frames[:-1]]
    assert len(events) == 2
    assert len({event["traceId"] for event in events}) == 1
    chunks = [types.GenerateContentResponse.model_validate(e["response"]) for e in events]
    assert "".join(chunk.text or "" for chunk in chunks) == sim.replies[-1].text
    last = chunks[-1].candidates
    assert last is not None
    assert last[0].finish_reason == types.FinishReason.STOP


def test_an_in_stream_error_is_a_bare_error_event(sim: SimUpstream) -> None:
    sim.push_fault(StreamErrorFault(after_events=1, error_type="INTERNAL", message="boom"))
    frames = call(sim, "streamGenerateContent", envelope(), query="?alt=sse").body
    error = orjson.loads(frames.split(b"\r\n\r\n")[1].removeprefix(b"data: "))
    assert error == {"error": {"code": 500, "message": "boom", "status": "INTERNAL"}}


def test_count_tokens_load_and_onboard(sim: SimUpstream) -> None:
    contents = [{"role": "user", "parts": [{"text": "Hello"}]}]
    counted = call(
        sim, "countTokens", {"request": {"model": f"models/{FLASH}", "contents": contents}}
    )
    assert counted.status == 200
    assert counted.json()["totalTokens"] > 0

    loaded = call(sim, "loadCodeAssist", {"metadata": {"ideType": "IDE_UNSPECIFIED"}}).json()
    assert loaded["currentTier"]["id"] == "free-tier"
    assert [tier["id"] for tier in loaded["allowedTiers"]] == ["free-tier"]
    assert loaded["cloudaicompanionProject"] == PROJECT

    onboarded = call(sim, "onboardUser", {"tierId": "free-tier", "metadata": {}}).json()
    assert onboarded["done"] is True
    assert onboarded["name"].startswith("operations/")
    assert onboarded["response"]["cloudaicompanionProject"] == {"id": PROJECT, "name": PROJECT}
    assert call(sim, "onboardUser", {"tierId": "standard-tier"}).status == 400


def test_a_wrong_token_is_401_and_a_wrong_project_403(sim: SimUpstream) -> None:
    refused = call(sim, "generateContent", envelope(), token="ya29.wrong")
    assert refused.status == 401
    assert refused.json()["error"]["status"] == "UNAUTHENTICATED"
    assert call(sim, "loadCodeAssist", {}, token="ya29.wrong").status == 401

    for project in ("someone-elses-project", None):
        body = envelope(project=project)
        denied = call(sim, "generateContent", body)
        assert denied.status == 403
        error = denied.json()["error"]
        assert error["status"] == "PERMISSION_DENIED"
        assert error["details"][0]["reason"] == "IAM_PERMISSION_DENIED"
    assert sim.tally.by_model() == {}


def test_the_inner_request_is_checked_like_the_gemini_apis(sim: SimUpstream) -> None:
    bad = envelope()
    bad["request"]["temperature"] = 1
    response = call(sim, "generateContent", bad)
    assert response.status == 400
    assert 'Unknown name "temperature"' in response.json()["error"]["message"]
    assert call(sim, "generateContent", envelope(model="gemini-9")).status == 404


def test_per_minute_and_daily_exhaustion_and_retrieve_user_quota_agree(sim: SimUpstream) -> None:
    assert call(sim, "generateContent", envelope(PRO)).status == 200
    assert call(sim, "generateContent", envelope(PRO)).status == 200
    daily = call(sim, "generateContent", envelope(PRO))
    assert daily.status == 429
    error = daily.json()["error"]
    assert error["status"] == "RESOURCE_EXHAUSTED"
    info, retry = error["details"]
    assert (info["reason"], info["domain"]) == ("QUOTA_EXHAUSTED", "cloudcode-pa.googleapis.com")
    assert info["metadata"]["model"] == PRO
    assert retry["@type"] == "type.googleapis.com/google.rpc.RetryInfo"
    signal = read_gemini_error(429, daily.body, now=sim.fake_clock.now())
    assert signal.terminal
    assert signal.retry_after_s == pytest.approx(86400, abs=1)

    quota = call(sim, "retrieveUserQuota", {"project": PROJECT}).json()["buckets"]
    pro = next(bucket for bucket in quota if bucket.get("modelId") == PRO)
    assert (pro["remainingAmount"], pro["remainingFraction"]) == ("0", 0.0)

    assert call(sim, "generateContent", envelope(FLASH)).status == 200
    minute = call(sim, "generateContent", envelope(FLASH))
    assert minute.status == 429
    info = minute.json()["error"]["details"][0]
    assert info["reason"] == "RATE_LIMIT_EXCEEDED"
    assert info["metadata"]["quotaResetDelay"] == "1m0s"
    assert not read_gemini_error(429, minute.body, now=sim.fake_clock.now()).terminal

    sim.fake_clock.advance(61)
    assert call(sim, "generateContent", envelope(FLASH)).status == 200


def _refresh(sim: SimUpstream, refresh: str, **form: str) -> httpx.Response:
    data = {"grant_type": "refresh_token", "refresh_token": refresh, **CLIENT, **form}
    return httpx.post(f"{sim.url}/token", data=data)


def test_googles_token_refresh_issues_tokens_the_api_accepts(sim: SimUpstream) -> None:
    answer = _refresh(sim, REFRESH)
    assert answer.status_code == 200
    token = answer.json()
    assert set(token) == {"access_token", "expires_in", "scope", "token_type", "id_token"}
    assert (token["expires_in"], token["token_type"]) == (3599, "Bearer")
    assert "cloud-platform" in token["scope"]
    # Google keeps the refresh token: the same one works again.
    assert _refresh(sim, REFRESH).status_code == 200
    assert call(sim, "generateContent", envelope(), token=token["access_token"]).status == 200

    sim.fake_clock.advance(3601)
    assert call(sim, "generateContent", envelope(), token=token["access_token"]).status == 401


def test_googles_token_refusals(sim: SimUpstream) -> None:
    refused = _refresh(sim, "1//revoked")
    assert refused.status_code == 400
    assert refused.json() == {"error": "invalid_grant", "error_description": "Bad Request"}
    missing = httpx.post(
        f"{sim.url}/token", data={"grant_type": "refresh_token", "refresh_token": REFRESH}
    )
    assert (missing.status_code, missing.json()["error"]) == (401, "invalid_client")
    assert sim.oauth is not None
    sim.oauth.push_fault(TokenFault(kind="invalid_grant"))
    assert _refresh(sim, REFRESH).json()["error"] == "invalid_grant"


def test_the_builtin_scenario_is_served_as_code_assist() -> None:
    scenario = load_scenario(builtin_scenario("gemini-code-assist"))
    assert (scenario.api, scenario.usage_endpoint) == ("code-assist", "gemini")
    assert scenario.oauth is not None
    assert scenario.oauth.style == "google"
    settings = scenario.code_assist_settings
    assert settings is not None
    with SimUpstream(scenario) as sim:
        body = envelope(project=settings.project)
        response = call(sim, "generateContent", body, token=scenario.auth.token or "")
        assert response.status == 200
        types.GenerateContentResponse.model_validate(response.json()["response"])


def test_code_assist_serves_retrieve_user_quota_unless_told_not_to() -> None:
    base = code_assist_scenario().model_dump(exclude={"usage_endpoint"})
    assert Scenario.model_validate(base).usage_endpoint == "gemini"
    assert Scenario.model_validate({**base, "usage_endpoint": "none"}).usage_endpoint == "none"


def test_the_methods_the_cli_calls_at_start_answer(sim: SimUpstream) -> None:
    experiments = call(sim, "listExperiments", {"project": PROJECT, "metadata": {}})
    assert experiments.json() == {"experimentIds": [], "flags": []}
    headers = {"authorization": f"Bearer {TOKEN}"}
    setting = request(sim.url, "GET", "/v1internal:getCodeAssistGlobalUserSetting", None, headers)
    assert setting.json()["cloudaicompanionProject"] == PROJECT
    assert request(sim.url, "GET", "/v1internal:listExperiments", None, headers).status == 404
    refused = request(sim.url, "GET", "/v1internal:getCodeAssistGlobalUserSetting", None, {})
    assert refused.status == 401
