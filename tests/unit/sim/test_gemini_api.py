"""The simulated Gemini API: the official google-genai SDK against the running sim, and
the wire shapes it cannot see (raw SSE framing, the JSON-array stream, error bodies)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import orjson
import pytest
from google import genai
from google.genai import errors, types

from rungway.quota.errors import read_gemini_error
from rungway.sim import (
    HttpErrorFault,
    ResponseSpec,
    Scenario,
    SimUpstream,
    StreamErrorFault,
    WindowSpec,
)
from rungway.sim.scenario import builtin_scenario, load_scenario

from .conftest import START, RawResponse, request

KEY = "AIzaSy-test-gemini-key"
FLASH = "gemini-2.5-flash"
PRO = "gemini-2.5-pro"
PACIFIC = ZoneInfo("America/Los_Angeles")


def gemini_scenario() -> Scenario:
    """The built-in free tier's shape with small limits: Pro 2 a minute and 3 a day."""
    return Scenario.model_validate(
        {
            "name": "test-gemini-api",
            "api": "gemini",
            "auth": {"kind": "x-api-key", "token": KEY},
            "models": [{"id": FLASH, "max_output_tokens": 1000}, {"id": PRO}],
            "windows": [
                {
                    "name": "pro-rpm",
                    "unit": "requests",
                    "capacity": 2,
                    "length_s": 60,
                    "model": PRO,
                },
                {
                    "name": "pro-rpd",
                    "unit": "requests",
                    "capacity": 3,
                    "length_s": 86400,
                    "reset_zone": "America/Los_Angeles",
                    "model": PRO,
                },
            ],
            "clock": {"start": START},
            "response": {
                "output_tokens": 12,
                "chunk_tokens": 4,
                "tool_calls": [{"name": "get_weather", "input": {"city": "Paris"}}],
            },
        }
    )


@pytest.fixture(scope="module")
def _server() -> Iterator[SimUpstream]:
    with SimUpstream(gemini_scenario()) as sim:
        yield sim


@pytest.fixture
def sim(_server: SimUpstream) -> SimUpstream:
    """The Gemini API sim, reset."""
    _server.reset()
    return _server


@pytest.fixture
def client(sim: SimUpstream) -> Iterator[genai.Client]:
    """The official SDK pointed at the sim."""
    with genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=sim.url)) as sdk:
        yield sdk


def post(sim: SimUpstream, path: str, body: object, key: str | None = KEY) -> RawResponse:
    headers = {"content-type": "application/json"}
    if key is not None:
        headers["x-goog-api-key"] = key
    return request(sim.url, "POST", path, body, headers)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


GENERATE = f"/v1beta/models/{FLASH}:generateContent"


def test_the_sdk_generates_counts_and_lists(sim: SimUpstream, client: genai.Client) -> None:
    reply = client.models.generate_content(model=FLASH, contents="Hello there")
    assert reply.text == sim.replies[-1].text
    assert reply.candidates is not None
    assert reply.candidates[0].finish_reason == types.FinishReason.STOP
    usage = reply.usage_metadata
    assert usage is not None
    assert usage.candidates_token_count == 12
    assert usage.total_token_count == (usage.prompt_token_count or 0) + 12
    assert reply.model_version == FLASH
    assert reply.response_id

    counted = client.models.count_tokens(model=FLASH, contents="Hello there")
    assert counted.total_tokens == usage.prompt_token_count

    assert [model.name for model in client.models.list()] == [f"models/{FLASH}", f"models/{PRO}"]
    pro = client.models.get(model=PRO)
    assert (pro.name, pro.input_token_limit) == (f"models/{PRO}", 1_048_576)


def test_the_sdk_streams_text_and_the_last_chunk_carries_the_finish(
    sim: SimUpstream, client: genai.Client
) -> None:
    chunks = list(client.models.generate_content_stream(model=FLASH, contents="Hello"))
    assert len(chunks) == 3
    assert "".join(chunk.text or "" for chunk in chunks) == sim.replies[-1].text
    assert [c.candidates[0].finish_reason for c in chunks if c.candidates] == [
        None,
        None,
        types.FinishReason.STOP,
    ]
    last = chunks[-1].usage_metadata
    assert last is not None
    assert last.candidates_token_count == 12


def test_sse_frames_end_in_crlf_crlf_and_validate_as_sdk_responses(sim: SimUpstream) -> None:
    response = post(sim, f"/v1beta/models/{FLASH}:streamGenerateContent?alt=sse", _body())
    assert response.status == 200
    assert (response.header("content-type") or "").startswith("text/event-stream")
    frames = response.body.split(b"\r\n\r\n")
    assert frames[-1] == b""
    payloads = [orjson.loads(frame.removeprefix(b"data: ")) for frame in frames[:-1]]
    for payload in payloads:
        types.GenerateContentResponse.model_validate(payload)
    assert [p["candidates"][0].get("finishReason") for p in payloads] == [None, None, "STOP"]
    assert "candidatesTokenCount" not in payloads[0]["usageMetadata"]


def test_a_stream_without_alt_sse_is_one_json_array(sim: SimUpstream) -> None:
    response = post(sim, f"/v1/models/{FLASH}:streamGenerateContent", _body())
    assert response.status == 200
    assert (response.header("content-type") or "").startswith("application/json")
    chunks = response.json()
    assert isinstance(chunks, list)
    assert len(chunks) == 3
    text = "".join(chunk["candidates"][0]["content"]["parts"][0]["text"] for chunk in chunks)
    assert text == sim.replies[-1].text


def _body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"contents": [user("Hello there")]}
    body.update(overrides)
    return body


def test_thoughts_tools_and_the_output_cap(sim: SimUpstream) -> None:
    config = {"thinkingConfig": {"includeThoughts": True}, "maxOutputTokens": 5}
    reply = post(sim, GENERATE, _body(generationConfig=config)).json()
    parsed = types.GenerateContentResponse.model_validate(reply)
    assert parsed.candidates is not None
    parts = parsed.candidates[0].content.parts  # type: ignore[union-attr]
    assert parts is not None
    assert [part.thought for part in parts] == [True, None]
    assert parsed.candidates[0].finish_reason == types.FinishReason.MAX_TOKENS
    usage = parsed.usage_metadata
    assert usage is not None
    assert usage.candidates_token_count == 5
    thoughts = usage.thoughts_token_count or 0
    assert thoughts > 0
    assert usage.total_token_count == (usage.prompt_token_count or 0) + 5 + thoughts

    tools = [{"functionDeclarations": [{"name": "get_weather", "description": "Weather"}]}]
    called = post(sim, GENERATE, _body(tools=tools)).json()
    call = called["candidates"][0]["content"]["parts"][0]["functionCall"]
    assert call == {"name": "get_weather", "args": {"city": "Paris"}}
    assert called["candidates"][0]["finishReason"] == "STOP"

    answer = {"functionResponse": {"name": "get_weather", "response": {"output": "Sunny"}}}
    turns = [
        user("Weather?"),
        {"role": "model", "parts": [{"functionCall": call}]},
        {"role": "user", "parts": [answer]},
    ]
    quoted = post(sim, GENERATE, _body(contents=turns, tools=tools)).json()
    assert quoted["candidates"][0]["content"]["parts"][0]["text"].endswith("Sunny")

    none = {"functionCallingConfig": {"mode": "NONE"}}
    assert (
        "text"
        in post(sim, GENERATE, _body(tools=tools, toolConfig=none)).json()["candidates"][0][
            "content"
        ]["parts"][0]
    )


def test_cached_content_is_part_of_the_prompt_count(sim: SimUpstream) -> None:
    plain = post(sim, GENERATE, _body()).json()["usageMetadata"]
    cached = post(sim, GENERATE, _body(cachedContent="cachedContents/abc")).json()
    usage = cached["usageMetadata"]
    assert usage["cachedContentTokenCount"] == 1024
    assert usage["promptTokenCount"] == plain["promptTokenCount"] + 1024


@pytest.mark.parametrize(
    ("key", "status", "reason"),
    [("wrong-key", 400, "API_KEY_INVALID"), (None, 403, "CONSUMER_INVALID")],
)
def test_a_bad_or_missing_key_is_refused_in_googles_shape(
    sim: SimUpstream, key: str | None, status: int, reason: str
) -> None:
    response = post(sim, GENERATE, _body(), key=key)
    assert response.status == status
    error = response.json()["error"]
    assert error["code"] == status
    assert error["details"][0]["reason"] == reason
    if status == 400:
        assert error["message"] == "API key not valid. Please pass a valid API key."
        assert error["status"] == "INVALID_ARGUMENT"
    assert sim.tally.by_model() == {}


def test_the_key_may_come_in_the_query(sim: SimUpstream) -> None:
    response = post(sim, f"{GENERATE}?key={KEY}", _body(), key=None)
    assert response.status == 200


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (_body(temperature=1), 'Unknown name "temperature": Cannot find field.'),
        ({}, "contents is not specified"),
        (_body(contents=[{"role": "assistant", "parts": [{"text": "x"}]}]), "valid role"),
        (_body(contents=[{"role": "user", "parts": []}]), "must not be empty"),
        (_body(generationConfig={"maxOutputTokens": 5000}), "maxOutputTokens value of 5000"),
    ],
)
def test_bad_requests_are_400_invalid_argument(
    sim: SimUpstream, body: dict[str, Any], message: str
) -> None:
    response = post(sim, GENERATE, body)
    assert response.status == 400
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert message in error["message"]
    assert sim.tally.by_model() == {}


def test_snake_case_fields_are_accepted_as_the_real_api_does(sim: SimUpstream) -> None:
    body = _body(system_instruction={"parts": [{"text": "Be brief."}]})
    body["generation_config"] = {"max_output_tokens": 2}
    response = post(sim, GENERATE, body)
    assert response.status == 200
    assert response.json()["usageMetadata"]["candidatesTokenCount"] == 2


def test_an_unknown_model_is_404_not_found(sim: SimUpstream, client: genai.Client) -> None:
    with pytest.raises(errors.ClientError) as raised:
        client.models.generate_content(model="gemini-9-ultra", contents="Hi")
    assert raised.value.code == 404
    assert raised.value.status == "NOT_FOUND"


def test_the_free_tier_refuses_per_minute_then_per_day_until_midnight_pacific(
    sim: SimUpstream, client: genai.Client
) -> None:
    clock = sim.fake_clock
    for _ in range(2):
        client.models.generate_content(model=PRO, contents="Hi")
    with pytest.raises(errors.ClientError) as raised:
        client.models.generate_content(model=PRO, contents="Hi")
    assert raised.value.code == 429
    minute = _violation(raised.value)
    assert minute["quotaId"] == "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"
    assert minute["quotaDimensions"] == {"location": "global", "model": PRO}
    assert minute["quotaValue"] == "2"
    # Other models have their own limits.
    client.models.generate_content(model=FLASH, contents="Hi")

    clock.advance(61)
    client.models.generate_content(model=PRO, contents="Hi")
    clock.advance(61)
    with pytest.raises(errors.ClientError) as raised:
        client.models.generate_content(model=PRO, contents="Hi")
    day = _violation(raised.value)
    assert day["quotaId"] == "GenerateRequestsPerDayPerProjectPerModel-FreeTier"
    details = raised.value.details["error"]["details"]
    assert [d["@type"].rsplit(".", 1)[1] for d in details] == ["Help", "QuotaFailure", "RetryInfo"]
    # The gateway's reader takes it as daily exhaustion, back at midnight Pacific, and the
    # sim's window resets exactly then.
    body = orjson.dumps(raised.value.details)
    signal = read_gemini_error(429, body, now=clock.now())
    assert signal.terminal
    midnight = _next_pacific_midnight(clock.now())
    assert [(w.resets_at, w.model) for w in signal.windows] == [(midnight, PRO)]
    assert datetime.fromtimestamp(midnight, PACIFIC).hour == 0

    clock.advance(midnight - clock.now() - 1)
    with pytest.raises(errors.ClientError):
        client.models.generate_content(model=PRO, contents="Hi")
    clock.advance(2)
    assert client.models.generate_content(model=PRO, contents="Hi").text


def _violation(error: errors.ClientError) -> dict[str, Any]:
    details = error.details["error"]["details"]
    failure = next(d for d in details if d["@type"].endswith("QuotaFailure"))
    violations: list[dict[str, Any]] = failure["violations"]
    assert len(violations) == 1
    return violations[0]


def _next_pacific_midnight(now: float) -> float:
    tomorrow = datetime.fromtimestamp(now, PACIFIC).date() + timedelta(days=1)
    return datetime.combine(tomorrow, time(0), tzinfo=PACIFIC).timestamp()


def test_faults_answer_in_googles_shape(sim: SimUpstream, client: genai.Client) -> None:
    sim.push_fault(HttpErrorFault(status=503, retry_after_s=7))
    with pytest.raises(errors.ServerError) as raised:
        client.models.generate_content(model=FLASH, contents="Hi")
    assert raised.value.code == 503
    assert raised.value.status == "UNAVAILABLE"
    retry = raised.value.details["error"]["details"][0]
    assert retry == {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}

    sim.push_fault(StreamErrorFault(after_events=1))
    path = f"/v1beta/models/{FLASH}:streamGenerateContent?alt=sse"
    frames = post(sim, path, _body()).body.split(b"\r\n\r\n")
    assert len(frames) == 3
    error = orjson.loads(frames[1].removeprefix(b"data: "))
    assert error == {
        "error": {
            "code": 503,
            "message": "The model is overloaded. Please try again later.",
            "status": "UNAVAILABLE",
        }
    }


def test_the_builtin_scenario_has_the_published_free_tier() -> None:
    scenario = load_scenario(builtin_scenario("gemini-api"))
    assert (scenario.api, scenario.quota_headers, scenario.auth.kind) == (
        "gemini",
        "none",
        "x-api-key",
    )
    daily = {w.model: w.capacity for w in scenario.windows if w.reset_zone is not None}
    assert daily == {FLASH: 250, PRO: 100, "gemini-2.5-flash-lite": 1000}
    minute = {w.model: w.capacity for w in scenario.windows if w.unit == "requests"}
    assert minute.keys() == daily.keys()


def test_google_apis_send_no_quota_headers_and_take_their_own_credential() -> None:
    base = gemini_scenario().model_dump()
    with pytest.raises(ValueError, match="no quota headers"):
        Scenario.model_validate({**base, "quota_headers": "openai"})
    with pytest.raises(ValueError, match="x-api-key"):
        Scenario.model_validate({**base, "auth": {"kind": "bearer", "token": "t"}})
    window = {"name": "d", "capacity": 1, "length_s": 86400, "reset_zone": "Mars/Olympus"}
    with pytest.raises(ValueError, match="reset_zone"):
        Scenario.model_validate({**base, "windows": [window]})


def test_an_echoing_fault_quotes_the_gemini_key(sim: SimUpstream) -> None:
    sim.push_fault(HttpErrorFault(status=400, message="Bad key", echo_credential=True))
    response = post(sim, GENERATE, _body())
    assert response.status == 400
    assert response.json()["error"]["message"] == f"Bad key: {KEY}"


def test_a_spent_token_window_names_the_input_token_quota() -> None:
    scenario = gemini_scenario().model_copy(
        update={
            "windows": (
                WindowSpec(name="tpm", unit="input_tokens", capacity=5, length_s=60, model=FLASH),
            )
        }
    )
    with SimUpstream(scenario) as tight:
        assert post(tight, GENERATE, _body()).status == 200
        refused = post(tight, GENERATE, _body())
    assert refused.status == 429
    details = refused.json()["error"]["details"]
    (violation,) = next(d for d in details if d["@type"].endswith("QuotaFailure"))["violations"]
    assert violation["quotaId"] == "GenerateContentInputTokensPerModelPerMinute-FreeTier"
    assert violation["quotaMetric"].endswith("generate_content_free_tier_input_token_count")
    signal = read_gemini_error(429, refused.body, now=START)
    assert not signal.terminal
    assert signal.retry_after_s is not None
    assert signal.retry_after_s <= 60


def test_unasked_thinking_is_counted_apart_and_a_zero_budget_turns_it_off() -> None:
    response = {"output_tokens": 4, "thought_tokens": 40}
    scenario = gemini_scenario().model_copy(
        update={"windows": (), "response": ResponseSpec.model_validate(response)}
    )
    with SimUpstream(scenario) as thinking:
        reply = post(thinking, GENERATE, _body()).json()
        off = {"thinkingConfig": {"thinkingBudget": 0, "includeThoughts": True}}
        plain = post(thinking, GENERATE, _body(generationConfig=off)).json()
    usage = reply["usageMetadata"]
    assert (usage["candidatesTokenCount"], usage["thoughtsTokenCount"]) == (4, 40)
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + 44
    assert [part.get("thought") for part in reply["candidates"][0]["content"]["parts"]] == [None]
    assert "thoughtsTokenCount" not in plain["usageMetadata"]
    assert len(plain["candidates"][0]["content"]["parts"]) == 1


def test_an_in_stream_error_closes_the_json_array(sim: SimUpstream) -> None:
    sim.push_fault(StreamErrorFault(after_events=1, error_type="INTERNAL"))
    elements = post(sim, f"/v1beta/models/{FLASH}:streamGenerateContent", _body()).json()
    assert len(elements) == 2
    types.GenerateContentResponse.model_validate(elements[0])
    assert elements[1]["error"]["code"] == 500
    assert elements[1]["error"]["status"] == "INTERNAL"

    sim.push_fault(StreamErrorFault(after_events=0))
    (error,) = post(sim, f"/v1beta/models/{FLASH}:streamGenerateContent", _body()).json()
    assert error["error"]["status"] == "UNAVAILABLE"
