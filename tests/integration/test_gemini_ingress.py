"""The official google-genai SDK talks to the gateway's Gemini ingress, streaming and not.

Its requests reach a Messages upstream and a Chat upstream translated, and a Gemini API
upstream as they are; bad requests get Google-shaped errors and reach nothing.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from google import genai
from google.genai import errors, types

from rungway.sim import (
    HttpErrorFault,
    Scenario,
    SimUpstream,
    StreamErrorFault,
    builtin_scenario,
    load_scenario,
)
from tests.integration.conftest import (
    API_KEY,
    CHEAP_KEY,
    CLAUDE,
    DEEPSEEK,
    START,
    RunningGateway,
    StartGateway,
    Upstreams,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "gemini"
FLASH = "gemini-2.5-flash"
TOOL_MODEL = "tool-model"
TOOL_KEY = "sk-gemini-ingress-tools"
CLIENT_KEY = "rk-gemini-client"
WEATHER_INPUT = {"city": "Paris"}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
NO_AUTOMATIC_CALLS = types.AutomaticFunctionCallingConfig(disable=True)
WEATHER_TOOL = types.Tool(
    function_declarations=[
        types.FunctionDeclaration(
            name="get_weather", description="The weather in a city.", parameters_json_schema=SCHEMA
        )
    ]
)


@dataclass
class World:
    gateway: RunningGateway
    sims: Upstreams
    tools: SimUpstream
    gemini: SimUpstream
    gemini_key: str
    clients: dict[tuple[str, str], genai.Client] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.gateway.url

    def client(self, key: str = CLIENT_KEY, version: str = "v1beta") -> genai.Client:
        """An SDK client, kept for the test: a client closes its connections when dropped."""
        if (key, version) not in self.clients:
            options = types.HttpOptions(base_url=self.url, api_version=version)
            self.clients[key, version] = genai.Client(api_key=key, http_options=options)
        return self.clients[key, version]

    def upstream_requests(self) -> int:
        sims = [*self.sims.all(), self.tools, self.gemini]
        return sum(len(sim.requests) for sim in sims)


def _tool_scenario() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "tools",
            "api": "openai",
            "auth": {"kind": "bearer", "token": TOOL_KEY},
            "models": [{"id": TOOL_MODEL}],
            "clock": {"start": START},
            "response": {
                "output_tokens": 6,
                "chunk_tokens": 2,
                "tool_calls": [{"name": "get_weather", "input": WEATHER_INPUT}],
            },
        }
    )


@pytest.fixture
def world(
    start_gateway: StartGateway,
    sims: Upstreams,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[World]:
    gemini_scenario = load_scenario(builtin_scenario("gemini-api"))
    gemini_scenario = gemini_scenario.model_copy(
        update={"response": gemini_scenario.response.model_copy(update={"first_byte_ms": 0})}
    )
    assert gemini_scenario.auth is not None
    gemini_key = gemini_scenario.auth.token or ""
    monkeypatch.setenv("RUNGWAY_IT_GEMINI_CLIENT", CLIENT_KEY)
    with SimUpstream(_tool_scenario()) as tools, SimUpstream(gemini_scenario) as gemini:
        for name, secret in (("tools", TOOL_KEY), ("gemini", gemini_key)):
            (tmp_path / f"{name}.secret").write_text(secret)

        def connection(cid: str, provider: str, url: str, model: str) -> dict[str, Any]:
            return {
                "id": cid,
                "provider": provider,
                "auth": "apikey",
                "credential": {"file": str(tmp_path / f"{cid}.secret")},
                "base_url": url,
                "models": [model],
            }

        gateway = start_gateway(
            connections=[
                connection("api", "anthropic", sims.api.url, CLAUDE),
                connection("cheap", "deepseek", f"{sims.cheap.url}/v1", DEEPSEEK),
                connection("tools", "openai-compatible", f"{tools.url}/v1", TOOL_MODEL),
                connection("gemini", "gemini", f"{gemini.url}/v1beta", FLASH),
            ],
            client_keys=[{"name": "gem", "key": {"env": "RUNGWAY_IT_GEMINI_CLIENT"}}],
        )
        world = World(gateway, sims, tools, gemini, gemini_key)
        yield world
        for client in world.clients.values():
            client.close()


def _headers(response: types.GenerateContentResponse) -> dict[str, str]:
    assert response.sdk_http_response is not None
    return response.sdk_http_response.headers or {}


def test_generate_content_is_served_by_a_messages_upstream(world: World) -> None:
    response = world.client().models.generate_content(
        model=CLAUDE,
        contents="Say hello.",
        config=types.GenerateContentConfig(system_instruction="You are terse.", temperature=0.4),
    )
    assert response.text is not None
    assert len(response.text.split()) == 24
    assert response.candidates is not None
    assert response.candidates[0].finish_reason == types.FinishReason.STOP
    assert response.usage_metadata is not None
    assert response.usage_metadata.candidates_token_count == 24
    assert _headers(response)["x-rungway-connection"] == "api"
    sent = world.sims.api.requests[-1]
    assert sent.path == "/v1/messages"
    assert sent.body["system"] == [{"type": "text", "text": "You are terse."}]
    assert sent.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Say hello."}]}
    ]
    assert sent.body["temperature"] == 0.4
    # The client's key stays at the gateway; the upstream sees its own.
    assert sent.header("x-goog-api-key") is None
    assert sent.header("x-api-key") == API_KEY
    (row,) = world.gateway.rows()
    assert (row["connection_id"], row["client_key"]) == ("api", "gem")
    assert (row["output_tokens"], row["stream"]) == (24, 0)
    assert row["input_tokens"] == response.usage_metadata.prompt_token_count


def test_a_stream_is_served_by_a_chat_upstream(world: World) -> None:
    chunks = list(
        world.client().models.generate_content_stream(model=DEEPSEEK, contents="Say hello.")
    )
    text = "".join(chunk.text or "" for chunk in chunks)
    assert len(text.split()) == 24
    last = chunks[-1]
    assert last.candidates is not None
    assert last.candidates[0].finish_reason == types.FinishReason.STOP
    assert last.usage_metadata is not None
    assert last.usage_metadata.candidates_token_count == 24
    assert all(chunk.usage_metadata is None for chunk in chunks[:-1])
    sent = world.sims.cheap.requests[-1]
    assert (sent.path, sent.body["stream"]) == ("/v1/chat/completions", True)
    assert sent.header("authorization") == f"Bearer {CHEAP_KEY}"
    (row,) = world.gateway.rows()
    assert (row["connection_id"], row["stream"], row["output_tokens"]) == ("cheap", 1, 24)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_function_call_and_its_response_cross_to_a_chat_upstream(
    world: World, stream: bool
) -> None:
    client = world.client()
    config = types.GenerateContentConfig(
        tools=[WEATHER_TOOL], automatic_function_calling=NO_AUTOMATIC_CALLS
    )
    question = types.Content(role="user", parts=[types.Part.from_text(text="Weather?")])

    def ask(contents: list[types.Content]) -> list[types.GenerateContentResponse]:
        if stream:
            return list(
                client.models.generate_content_stream(
                    model=TOOL_MODEL, contents=contents, config=config
                )
            )
        return [client.models.generate_content(model=TOOL_MODEL, contents=contents, config=config)]

    first = ask([question])
    calls = [call for chunk in first for call in chunk.function_calls or ()]
    assert [(call.name, call.args) for call in calls] == [("get_weather", WEATHER_INPUT)]
    (call,) = calls
    assert call.id
    offered = world.tools.requests[-1].body["tools"]
    assert offered == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather in a city.",
                "parameters": SCHEMA,
            },
        }
    ]
    answer = types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(
                    id=call.id, name="get_weather", response={"output": "18 C and clear"}
                )
            )
        ],
    )
    model_turn = types.Content(role="model", parts=[types.Part(function_call=call)])
    second = ask([question, model_turn, answer])
    assert "".join(chunk.text or "" for chunk in second) == "The tool returned: 18 C and clear"
    messages = world.tools.requests[-1].body["messages"]
    assert messages[1]["tool_calls"][0]["id"] == call.id
    assert messages[2] == {"role": "tool", "tool_call_id": call.id, "content": "18 C and clear"}


def test_json_output_with_a_schema_reaches_a_chat_upstream(world: World) -> None:
    response = world.client().models.generate_content(
        model=DEEPSEEK,
        contents="The weather in Paris, as JSON.",
        config=types.GenerateContentConfig(
            response_mime_type="application/json", response_json_schema=SCHEMA
        ),
    )
    assert response.text
    sent = world.sims.cheap.requests[-1].body
    assert sent["response_format"]["type"] == "json_schema"
    assert sent["response_format"]["json_schema"]["schema"] == SCHEMA


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_gemini_upstream_gets_the_request_as_it_came(world: World, stream: bool) -> None:
    client = world.client()
    config = types.GenerateContentConfig(max_output_tokens=50)
    if stream:
        chunks = list(
            client.models.generate_content_stream(model=FLASH, contents="Hi.", config=config)
        )
    else:
        chunks = [client.models.generate_content(model=FLASH, contents="Hi.", config=config)]
    assert "".join(chunk.text or "" for chunk in chunks)
    assert chunks[-1].usage_metadata is not None
    sent = world.gemini.requests[-1]
    method = "streamGenerateContent" if stream else "generateContent"
    assert sent.path == f"/v1beta/models/{FLASH}:{method}"
    assert sent.query == ("alt=sse" if stream else "")
    # The gateway's own keys are gone, and the key is the upstream's.
    assert sent.body == {
        "contents": [{"role": "user", "parts": [{"text": "Hi."}]}],
        "generationConfig": {"maxOutputTokens": 50},
    }
    assert sent.header("x-goog-api-key") == world.gemini_key
    (row,) = world.gateway.rows()
    assert (row["connection_id"], row["stream"]) == ("gemini", int(stream))
    assert row["output_tokens"] == chunks[-1].usage_metadata.candidates_token_count


def test_the_v1_api_version_is_served_too(world: World) -> None:
    response = world.client(version="v1").models.generate_content(model=CLAUDE, contents="Hi.")
    assert response.text is not None
    assert len(response.text.split()) == 24


def test_tokens_are_counted_by_a_gemini_upstream_or_estimated(world: World) -> None:
    client = world.client()
    counted = client.models.count_tokens(model=FLASH, contents="How many tokens is this?")
    assert counted.total_tokens is not None
    assert counted.total_tokens > 0
    assert world.gemini.requests[-1].path == f"/v1beta/models/{FLASH}:countTokens"
    before = world.upstream_requests()
    estimated = client.models.count_tokens(model=DEEPSEEK, contents="How many tokens is this?")
    assert estimated.total_tokens is not None
    assert estimated.total_tokens > 0
    assert world.upstream_requests() == before  # the Chat upstream cannot count: estimated
    assert world.gateway.rows() == []


def test_models_are_listed_in_gemini_shape(world: World) -> None:
    client = world.client()
    names = [model.name or "" for model in client.models.list()]
    # The routed models, and the aliases and plans the OpenAI listing names too.
    assert {f"models/{m}" for m in (CLAUDE, DEEPSEEK, TOOL_MODEL, FLASH, "auto")} <= set(names)
    model = client.models.get(model=CLAUDE)
    assert model.name == f"models/{CLAUDE}"
    assert model.supported_actions == ["generateContent", "streamGenerateContent", "countTokens"]
    with pytest.raises(errors.ClientError) as missing:
        client.models.get(model="no-such-model")
    assert (missing.value.code, missing.value.status) == (404, "NOT_FOUND")
    # The v1 listing is Gemini's for Google's clients, and stays OpenAI's for the others.
    v1 = [model.name or "" for model in world.client(version="v1").models.list()]
    assert sorted(v1) == sorted(names)
    listed = httpx.get(
        f"{world.url}/v1/models", headers={"authorization": f"Bearer {CLIENT_KEY}"}
    ).json()
    assert listed["object"] == "list"
    assert sorted(f"models/{entry['id']}" for entry in listed["data"]) == sorted(names)


def test_the_client_key_may_come_as_a_query_parameter_and_a_wrong_one_is_refused(
    world: World,
) -> None:
    url = f"{world.url}/v1beta/models/{DEEPSEEK}:generateContent"
    body = {"contents": [{"role": "user", "parts": [{"text": "Hi."}]}]}
    answered = httpx.post(url, params={"key": CLIENT_KEY}, json=body, timeout=10)
    assert answered.status_code == 200, answered.text
    (row,) = world.gateway.rows()
    assert row["client_key"] == "gem"
    assert world.sims.cheap.requests[-1].query == ""
    with pytest.raises(errors.ClientError) as refused:
        world.client(key="rk-wrong").models.generate_content(model=DEEPSEEK, contents="Hi.")
    assert (refused.value.code, refused.value.status) == (401, "UNAUTHENTICATED")
    missing = httpx.post(url, json=body, timeout=10)
    assert missing.status_code == 401
    assert "x-goog-api-key" in missing.json()["error"]["message"]


BAD: list[tuple[str, str, dict[str, Any] | bytes, tuple[int, str]]] = [
    ("POST", f"{DEEPSEEK}:generateContent", {"contents": []}, (400, "contents is required")),
    (
        "POST",
        f"{DEEPSEEK}:generateContent",
        {"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]},
        (400, "contents[0].role"),
    ),
    (
        "POST",
        f"{DEEPSEEK}:generateContent",
        {"contents": [{"parts": [{"text": "x"}]}], "generationConfig": {"maxOutputTokens": -1}},
        (400, "generationConfig.maxOutputTokens"),
    ),
    ("POST", f"{DEEPSEEK}:generateContent", b"{not json", (400, "not valid JSON")),
    ("POST", f"{DEEPSEEK}:streamGenerateContent", {"contents": []}, (400, "contents")),
    ("POST", f"{DEEPSEEK}:embedContent", {}, (404, "embedContent")),
    ("GET", f"{DEEPSEEK}:generateContent", b"", (405, "use POST")),
    ("POST", ":generateContent", {"contents": []}, (400, "no model")),
]


@pytest.mark.parametrize(("method", "tail", "body", "expected"), BAD)
def test_a_bad_request_gets_a_google_error_and_reaches_nothing(
    world: World, method: str, tail: str, body: dict[str, Any] | bytes, expected: tuple[int, str]
) -> None:
    status, words = expected
    before = world.upstream_requests()
    content = body if isinstance(body, bytes) else None
    response = httpx.request(
        method,
        f"{world.url}/v1beta/models/{tail}",
        headers={"x-goog-api-key": CLIENT_KEY},
        json=None if content is not None else body,
        content=content,
        timeout=10,
    )
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == status
    assert error["status"] in ("INVALID_ARGUMENT", "NOT_FOUND", "UNIMPLEMENTED")
    assert words in error["message"]
    assert world.upstream_requests() == before


def test_the_sdk_reads_a_refusal_as_its_own_client_error(world: World) -> None:
    with pytest.raises(errors.ClientError) as refused:
        world.client().models.generate_content(
            model=DEEPSEEK,
            contents="Hi.",
            config=types.GenerateContentConfig(
                thinking_config=types.ThinkingConfig(thinking_budget=-7)
            ),
        )
    assert (refused.value.code, refused.value.status) == (400, "INVALID_ARGUMENT")
    assert "thinkingBudget" in (refused.value.message or "")


def test_an_upstream_rejection_reaches_the_sdk_in_google_shape(world: World) -> None:
    world.sims.cheap.push_fault(HttpErrorFault(status=400, message="messages: bad role"))
    with pytest.raises(errors.ClientError) as rejected:
        world.client().models.generate_content(model=DEEPSEEK, contents="Hi.")
    assert (rejected.value.code, rejected.value.status) == (400, "INVALID_ARGUMENT")
    assert "bad role" in (rejected.value.message or "")


def test_an_error_inside_a_stream_after_content_ends_it_with_a_google_error_event(
    world: World,
) -> None:
    world.sims.cheap.push_fault(StreamErrorFault(after_events=4, error_type="server_error"))
    text: list[str] = []

    def read_all() -> None:
        for chunk in world.client().models.generate_content_stream(
            model=DEEPSEEK, contents="Say hello."
        ):
            text.append(chunk.text or "")

    with pytest.raises(errors.APIError) as broken:
        read_all()
    assert "".join(text)  # content came first, so the stream could not move elsewhere
    assert broken.value.code >= 500
    (row,) = world.gateway.rows()
    assert (row["connection_id"], row["stream"]) == ("cheap", 1)
    assert row["outcome"] != "ok"


def test_a_base_url_with_its_own_version_path_is_told_what_to_fix(world: World) -> None:
    # The SDK adds the API version to the base URL: one already ending in /v1beta doubles it.
    options = types.HttpOptions(base_url=f"{world.url}/v1beta", api_version="v1beta")
    client = genai.Client(api_key=CLIENT_KEY, http_options=options)
    try:
        with pytest.raises(errors.ClientError) as missed:
            client.models.generate_content(model=DEEPSEEK, contents="Hi.")
    finally:
        client.close()
    assert (missed.value.code, missed.value.status) == (404, "NOT_FOUND")
    assert "base URL for this gateway is its root" in (missed.value.message or "")


def test_a_body_too_slow_for_the_server_is_refused_in_google_shape(
    start_gateway: StartGateway,
) -> None:
    # The HTTP layer itself refuses a body that does not arrive in time, before the app.
    gateway = start_gateway(server={"body_timeout_s": 0.5})
    host, port = gateway.url.removeprefix("http://").split(":")
    path = f"/v1beta/models/{DEEPSEEK}:generateContent"
    head = f"POST {path} HTTP/1.1\r\nhost: gateway\r\ncontent-length: 100\r\n\r\n{{"
    data = b""
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head.encode())
        while chunk := sock.recv(65536):
            data += chunk
    status_line, _, rest = data.partition(b"\r\n")
    assert status_line.split(b" ")[1] == b"408"
    error = orjson.loads(rest.partition(b"\r\n\r\n")[2])["error"]
    assert (error["code"], error["status"]) == (408, "DEADLINE_EXCEEDED")
    assert "did not arrive within 0.5s" in error["message"]


@pytest.mark.parametrize("model", [DEEPSEEK, FLASH], ids=["translated", "gemini"])
def test_a_stream_without_alt_sse_is_served_as_a_json_array(world: World, model: str) -> None:
    response = httpx.post(
        f"{world.url}/v1beta/models/{model}:streamGenerateContent",
        headers={"x-goog-api-key": CLIENT_KEY},
        json={"contents": [{"role": "user", "parts": [{"text": "Say hello."}]}]},
        timeout=30,
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    chunks = [
        types.GenerateContentResponse.model_validate_json(orjson.dumps(chunk))
        for chunk in response.json()
    ]
    assert len(chunks) > 1
    assert "".join(chunk.text or "" for chunk in chunks)
    last = chunks[-1]
    assert last.candidates is not None
    assert last.candidates[0].finish_reason == types.FinishReason.STOP
    assert last.usage_metadata is not None
    (row,) = world.gateway.rows()
    assert row["stream"] == 1


def test_an_error_inside_a_json_array_stream_is_its_last_item(world: World) -> None:
    world.sims.cheap.push_fault(StreamErrorFault(after_events=4, error_type="server_error"))
    response = httpx.post(
        f"{world.url}/v1beta/models/{DEEPSEEK}:streamGenerateContent",
        headers={"x-goog-api-key": CLIENT_KEY},
        json={"contents": [{"role": "user", "parts": [{"text": "Say hello."}]}]},
        timeout=30,
    )
    items = response.json()
    assert response.status_code == 200
    assert "candidates" in items[0]
    assert set(items[-1]) == {"error"}
    assert items[-1]["error"]["code"] >= 500


def _paths(value: object, at: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Every path into a JSON value: its objects, arrays and leaves alike."""
    found = [at]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*at, index))
    return found


ODD_VALUES: tuple[object, ...] = (None, 7, "x", [], {})


def test_every_field_of_a_full_request_set_wrong_gets_a_400_or_an_answer(world: World) -> None:
    base = orjson.loads((FIXTURES / "request_full.json").read_bytes())
    for gateway_key in ("model", "stream"):  # the URL says these
        del base[gateway_key]
    url = f"{world.url}/v1beta/models/{DEEPSEEK}:generateContent"
    refused = answered = 0
    with httpx.Client(headers={"x-goog-api-key": CLIENT_KEY}, timeout=30) as http:
        for path in _paths(base)[1:]:
            for value in ODD_VALUES:
                body = orjson.loads(orjson.dumps(base))
                holder = body
                for key in path[:-1]:
                    holder = holder[key]
                holder[path[-1]] = value
                before = len(world.sims.cheap.requests)
                response = http.post(url, content=orjson.dumps(body))
                if response.status_code == 400:
                    error = response.json()["error"]
                    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
                    assert len(world.sims.cheap.requests) == before, (path, value)
                    refused += 1
                else:
                    assert response.status_code == 200, (path, value, response.text)
                    answered += 1
    assert refused > 100
    assert answered > 100
