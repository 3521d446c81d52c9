"""Capability-aware dispatch through a live gateway: a model that cannot serve the request
is skipped with its reason, which `rungway explain` shows, and structured output reaches a
translated upstream instead of being dropped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import openai
import orjson

from rungway.sim import QuotaExhaustedFault, SimUpstream
from tests.integration.conftest import (
    CLAUDE,
    CLAUDE_CODE_HEADERS,
    RunningGateway,
    StartGateway,
    Upstreams,
    with_a_widened_plan,
)

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5E"
    "rkJggg=="
)
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}


def _explain(request_id: str, gateway: RunningGateway) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "rungway", "explain", request_id, "--url", gateway.url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"COLUMNS": "250", "PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _skips(gateway: RunningGateway, request_id: str) -> list[dict[str, Any]]:
    (row,) = [row for row in gateway.rows() if row["request_id"] == request_id]
    plan = row["plan"]
    skipped: list[dict[str, Any]] = (orjson.loads(plan) if isinstance(plan, str) else plan)[
        "skipped"
    ]
    return skipped


def test_an_image_skips_the_text_only_models_and_explain_says_why(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    content: list[Any] = [{"type": "text", "text": "What is it?"}, image]
    # Claude Code, the one client the plan serves: this test is about images.
    with anthropic.Anthropic(
        base_url=gateway.url, api_key="unused", max_retries=0, default_headers=CLAUDE_CODE_HEADERS
    ) as client:
        raw = client.messages.with_raw_response.create(
            model="auto/thrifty",
            max_tokens=64,
            messages=[{"role": "user", "content": content}],
        )
    request_id = raw.headers["x-rungway-request-id"]
    assert raw.parse().model == CLAUDE
    shown = _explain(request_id[:8], gateway)
    assert "no_vision" in shown
    assert "deepseek-chat does not read images" in shown
    reasons = {(skip["model"], skip["reason"]) for skip in _skips(gateway, request_id)}
    assert reasons == {
        ("deepseek/deepseek-chat", "no_vision"),
        ("openai-compatible/deepseek-chat", "no_vision"),
    }


def test_with_the_claude_plans_spent_an_image_gets_no_text_only_model(
    start_gateway: StartGateway, sims: Upstreams, any_client_plan: SimUpstream, tmp_path: Path
) -> None:
    # An OpenAI client, kept off a Claude plan by its terms, would never find the plan spent:
    # the plan's connection is widened on purpose (`clients: any`) so the plan is asked.
    gateway = start_gateway(connections=with_a_widened_plan(sims, any_client_plan, tmp_path))
    any_client_plan.push_fault(QuotaExhaustedFault(window="5h"))
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    content: list[Any] = [{"type": "text", "text": "What?"}, image]
    with openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="auto/thrifty",
            messages=[{"role": "user", "content": content}],
        )
    # The plan answered 429 and the ladder went on to the Claude key, never to DeepSeek.
    assert raw.parse().model == CLAUDE
    (row,) = gateway.rows()
    assert [(a["connection_id"], a["outcome"]) for a in row["attempts"]] == [
        ("plan", "quota_exhausted")
    ]
    assert sims.cheap.requests == []
    assert sims.backup.requests == []


def test_a_schema_reaches_a_claude_upstream_as_its_output_format(
    start_gateway: StartGateway, sims: Upstreams, any_client_plan: SimUpstream, tmp_path: Path
) -> None:
    # The Claude plan serves Claude Code only, and an OpenAI client is not Claude Code: this
    # test is about an OpenAI schema translated for a Claude upstream, so the plan's
    # connection is widened on purpose (`clients: any`) in front of a plan that does not
    # check its client.
    gateway = start_gateway(connections=with_a_widened_plan(sims, any_client_plan, tmp_path))
    with openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="auto/thrifty",
            messages=[{"role": "user", "content": "Paris, as JSON."}],
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "place", "schema": SCHEMA, "strict": True},
            },
        )
    request_id = raw.headers["x-rungway-request-id"]
    sent = any_client_plan.requests[-1].body
    assert sent["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}
    # DeepSeek's JSON mode cannot hold a reply to a schema: both its connections are skipped.
    reasons = {(skip["model"], skip["reason"]) for skip in _skips(gateway, request_id)}
    assert ("deepseek/deepseek-chat", "no_structured_output") in reasons
