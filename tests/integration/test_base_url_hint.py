"""An OpenAI-compatible base URL without its version path: the error says which was meant."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from rungway.sim import Scenario, SimUpstream

from .conftest import CHEAP_KEY, DEEPSEEK, StartGateway, Upstreams

HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]
RESPONSES_KEY = "sk-integration-responses"


def _connection(
    connection_id: str, provider: str, url: str, model: str, secret: Path
) -> dict[str, Any]:
    return {
        "id": connection_id,
        "provider": provider,
        "auth": "apikey",
        "credential": {"file": str(secret)},
        "base_url": url,
        "models": [model],
    }


def test_the_simulated_openai_api_answers_a_path_without_v1_as_the_real_one(
    sims: Upstreams,
) -> None:
    response = httpx.post(
        f"{sims.cheap.url}/chat/completions",
        json={"model": DEEPSEEK, "messages": HELLO},
        headers={"authorization": f"Bearer {CHEAP_KEY}"},
    )
    assert response.status_code == 404
    assert orjson.loads(response.content) == {
        "error": {
            "message": "Invalid URL (POST /chat/completions)",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }


@pytest.mark.parametrize("stream", [False, True])
def test_a_chat_base_url_without_v1_gets_did_you_mean_v1(
    start_gateway: StartGateway, sims: Upstreams, tmp_path: Path, stream: bool
) -> None:
    (tmp_path / "bare.secret").write_text(CHEAP_KEY)
    bare = _connection(
        "bare", "openai-compatible", sims.cheap.url, DEEPSEEK, tmp_path / "bare.secret"
    )
    gateway = start_gateway(connections=[bare])
    answer = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        json={"model": DEEPSEEK, "messages": HELLO, "stream": stream},
    )
    hint = f"did you mean {sims.cheap.url}/v1?"
    assert answer.status_code == 404, answer.text
    message = answer.json()["error"]["message"]
    assert "Invalid URL (POST /chat/completions)" in message
    assert message.endswith(hint)
    (row,) = gateway.rows()
    (attempt,) = row["attempts"]
    assert (attempt["connection_id"], attempt["status"]) == ("bare", 404)
    assert attempt["detail"] == f"Invalid URL (POST /chat/completions); {hint}"


def test_a_base_url_with_v1_gets_no_hint(
    start_gateway: StartGateway, sims: Upstreams, tmp_path: Path
) -> None:
    # A 404 from the API itself (here a model the upstream does not serve) is no URL problem.
    (tmp_path / "cheap.secret").write_text(CHEAP_KEY)
    cheap = _connection(
        "cheap", "openai-compatible", f"{sims.cheap.url}/v1", "gpt-none", tmp_path / "cheap.secret"
    )
    gateway = start_gateway(connections=[cheap])
    answer = httpx.post(
        f"{gateway.url}/v1/chat/completions", json={"model": "gpt-none", "messages": HELLO}
    )
    assert answer.status_code == 404
    assert "does not exist" in answer.json()["error"]["message"]
    assert "did you mean" not in answer.text


@pytest.fixture
def responses_sim() -> Any:
    scenario = Scenario.model_validate(
        {
            "name": "responses",
            "api": "responses",
            "quota_headers": "openai",
            "auth": {"kind": "bearer", "token": RESPONSES_KEY},
            "models": [{"id": "gpt-5", "context_window": 400000, "max_output_tokens": 8192}],
            "response": {"output_tokens": 12, "chunk_tokens": 4},
        }
    )
    with SimUpstream(scenario) as sim:
        yield sim


def test_a_responses_base_url_without_v1_gets_did_you_mean_v1(
    start_gateway: StartGateway, responses_sim: SimUpstream, tmp_path: Path
) -> None:
    (tmp_path / "responses.secret").write_text(RESPONSES_KEY)
    connection = _connection(
        "responses", "openai-responses", responses_sim.url, "gpt-5", tmp_path / "responses.secret"
    )
    gateway = start_gateway(connections=[connection])
    answer = httpx.post(
        f"{gateway.url}/v1/responses", json={"model": "gpt-5", "input": "Say hello."}
    )
    hint = f"did you mean {responses_sim.url}/v1?"
    assert answer.status_code == 404, answer.text
    message = answer.json()["error"]["message"]
    assert "Invalid URL (POST /responses)" in message
    assert message.endswith(hint)
    (row,) = gateway.rows()
    assert row["attempts"][0]["detail"] == f"Invalid URL (POST /responses); {hint}"
    # With the version path the same connection answers.
    fixed = {**connection, "base_url": f"{responses_sim.url}/v1"}
    gateway = start_gateway(connections=[fixed])
    answer = httpx.post(
        f"{gateway.url}/v1/responses", json={"model": "gpt-5", "input": "Say hello."}
    )
    assert answer.status_code == 200, answer.text
