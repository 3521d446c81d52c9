"""The Gemini CLI (`gemini -p`) through the gateway's Gemini API: the plan, a tool, the ladder."""

# What the Gemini CLI 0.61.0 does, read from its bundle and seen against a loopback server
# that logged every request (conftest's GeminiCli sets all of this up):
# - Base URL: GOOGLE_GEMINI_BASE_URL (GOOGLE_VERTEX_BASE_URL for Vertex AI), without the
#   version; the API version is v1beta (GOOGLE_GENAI_API_VERSION changes it).
# - Login: with GOOGLE_GEMINI_BASE_URL set and none chosen, the CLI picks its "gateway" login,
#   which its headless check refuses ("Invalid auth method selected.", exit 41). With
#   security.auth.selectedType "gemini-api-key" in ~/.gemini/settings.json it takes
#   GEMINI_API_KEY and sends it as x-goog-api-key (GEMINI_API_KEY_AUTH_MECHANISM=bearer
#   sends `Authorization: Bearer` instead). No Google login is needed.
# - Requests: one `POST /v1beta/models/{model}:streamGenerateContent?alt=sse` a turn, with
#   systemInstruction, tools as functionDeclarations with parametersJsonSchema, and
#   generationConfig {temperature, topP, topK, thinkingConfig {includeThoughts,
#   thinkingBudget or thinkingLevel}}; no maxOutputTokens. `-m` takes any name, an auto id
#   too (`models/auto/thrifty:streamGenerateContent`). Without `-m` the model is "auto":
#   a `:generateContent` call to a classifier model (gemini-3.5-flash-lite) with a
#   responseJsonSchema picks it first, and a reply that is not JSON is asked again with
#   backoff for over a minute, so these tests name the model. Neither `GET models` nor
#   countTokens is called in these runs. `--output-format json` prints the reply and the
#   token counts, filed under the reply's modelVersion.
# - A tool turn: the model's functionCall comes back with an `id` and a thoughtSignature
#   the CLI fills in ("skip_thought_signature_validator"), and the result as a
#   functionResponse with the same id and {"output": ...}. Headless, only read-only tools
#   are offered; `--yolo` adds run_shell_command and runs it without asking.
# - A 429: it waits (RetryInfo's delay or its own backoff) and tries again, up to
#   general.maxAttempts (10) times; with 1 it exits 1 at once.
# - Other hosts: usage statistics go to play.googleapis.com unless
#   privacy.usageStatisticsEnabled is false; update checks, telemetry and the IDE link have
#   settings too. Headless runs in an untrusted folder exit 55 without
#   GEMINI_CLI_TRUST_WORKSPACE=true (or --skip-trust).

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.clients.conftest import (
    CHEAP_REPLY,
    FREE_REPLY,
    GEMINI_CLIENT_KEY,
    GEMINI_MODEL,
    GEMINI_PLAN_REPLY,
    SUBSCRIPTION_REPLY,
    TOOL_MARKER,
    CliRun,
    GeminiCli,
    StartWorld,
    World,
    inference_requests,
)

pytestmark = pytest.mark.clients

MakeGemini = Callable[[World], GeminiCli]

STREAM_PATH = f"/v1beta/models/{GEMINI_MODEL}:streamGenerateContent"


def _output(run: CliRun) -> dict[str, Any]:
    """The CLI's JSON report (`--output-format json`): its response and its stats."""
    assert run.returncode == 0, run.describe()
    try:
        report = json.loads(run.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"the CLI printed no JSON report\n{run.describe()}")
    assert isinstance(report, dict), run.describe()
    return report


def _assert_same_usage(report: dict[str, Any], row: dict[str, Any]) -> None:
    """The token counts the CLI read from the stream's usageMetadata are the ledger row's.

    The CLI files them under the reply's modelVersion, the model that served. Google counts
    the prompt with its cached part and thoughts apart from the candidates; the ledger keeps
    input without the cache and output with the thoughts."""
    models = report["stats"]["models"]
    assert list(models) == [row["upstream_model"]], models
    tokens = models[row["upstream_model"]]["tokens"]
    assert (
        tokens["prompt"],
        tokens["cached"],
        tokens["candidates"] + tokens["thoughts"],
        tokens["thoughts"],
    ) == (
        row["input_tokens"] + row["cache_read_tokens"],
        row["cache_read_tokens"],
        row["output_tokens"],
        row["reasoning_tokens"],
    ), (tokens, row)


def _assert_clean_gateway_calls(world: World) -> None:
    """The CLI only streamed generateContent for its model, and every answer was a 200."""
    calls = world.endpoints()
    assert {(method, path) for method, path, _ in calls} == {("POST", STREAM_PATH)}, calls
    assert all(status == 200 for _, _, status in calls), calls


CLI_REQUEST_FIELDS = {"contents", "systemInstruction", "tools", "generationConfig"}
"""What the CLI's GenerateContentRequest holds (conftest's GeminiCli runs)."""


def _served(world: World, rung: str, connection_id: str, tried: set[str]) -> dict[str, Any]:
    """The newest ledger row, checked to be the CLI's request served on `rung` by
    `connection_id` after the connections in `tried` refused it as spent."""
    row = world.rows()[0]
    assert (row["rung"], row["connection_id"], row["outcome"]) == (rung, connection_id, "ok"), row
    assert (row["api"], row["client_key"], row["requested_model"]) == (
        "gemini",
        "gemini-cli",
        GEMINI_MODEL,
    ), row
    attempts = {(attempt["connection_id"], attempt["outcome"]) for attempt in row["attempts"]}
    assert attempts == {(tried_id, "quota_exhausted") for tried_id in tried}, row["attempts"]
    return row


def test_gemini_cli_is_kept_off_a_claude_plan_by_its_terms_and_served_by_the_cheap_rung(
    start_world: StartWorld, gemini: MakeGemini
) -> None:
    world = start_world("claude")

    report = _output(gemini(world).run("Say hello."))

    assert report["response"].strip() == CHEAP_REPLY
    row = _served(world, "cheap", "cheap", tried=set())
    _assert_same_usage(report, row)
    skipped = {
        (skip["connection"], skip["reason"], skip["detail"]) for skip in row["plan"]["skipped"]
    }
    assert ("claude-plan", "terms", "terms: claude plans serve Claude Code only") in skipped
    assert not inference_requests(world.subscription), "the plan was never asked"
    _assert_clean_gateway_calls(world)


def test_gemini_cli_is_served_by_a_widened_claude_plan_and_then_by_the_cheap_rung(
    start_world: StartWorld, gemini: MakeGemini
) -> None:
    world = start_world("claude", widened=True)
    cli = gemini(world)

    report = _output(cli.run("Say hello."))

    assert report["response"].strip() == SUBSCRIPTION_REPLY
    row = _served(world, "subscription", "claude-plan", tried=set())
    assert len(world.rows()) == 1
    # The usage the CLI counted is what the gateway recorded from the plan's answer.
    _assert_same_usage(report, row)
    (sent,) = inference_requests(world.subscription)
    assert (sent.path, sent.body["stream"]) == ("/v1/messages", True)
    assert sent.body["messages"][-1]["role"] == "user"
    assert "Say hello." in json.dumps(sent.body["messages"][-1])
    assert not world.cheap.requests, "nothing reached the cheap rung"

    world.exhaust_subscription()
    report = _output(cli.run("Say hello again."))

    assert report["response"].strip() == CHEAP_REPLY
    # The spent plan is asked once: its window covers every model.
    row = _served(world, "cheap", "cheap", tried={"claude-plan"})
    assert len(row["attempts"]) == 1, row["attempts"]
    _assert_same_usage(report, row)
    (sent,) = inference_requests(world.cheap)
    assert (sent.path, sent.body["model"]) == ("/v1/chat/completions", "deepseek-chat")
    assert "Say hello again." in json.dumps(sent.body["messages"][-1])
    _assert_clean_gateway_calls(world)


# The command prints the marker without containing it, so only a run command can show it.
SHELL_CALL: dict[str, Any] = {
    "name": "run_shell_command",
    "input": {
        "command": "printf '%s-%s\\n' rungway-tool ok",
        "description": "Print the rungway marker",
    },
}


def _blocks(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict) and block.get("type") == kind]


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _anthropic_tool_turn(body: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The tool calls (name, input) of a Messages follow-up, and its results' text, checked
    to answer those calls by id."""
    messages = body["messages"]
    calls = [
        block
        for message in messages
        if message.get("role") == "assistant"
        for block in _blocks(message, "tool_use")
    ]
    results = [
        block
        for message in messages
        if message.get("role") == "user"
        for block in _blocks(message, "tool_result")
    ]
    assert [result["tool_use_id"] for result in results] == [call["id"] for call in calls]
    assert not any(result.get("is_error") for result in results), results
    return (
        [{"name": call["name"], "input": call["input"]} for call in calls],
        [_text(result["content"]) for result in results],
    )


def _gemini_tool_turn(body: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The same for a Gemini follow-up: functionCall parts of model turns, and the
    functionResponse parts after them, named as the calls and answering their ids."""
    parts = [(turn["role"], part) for turn in body["contents"] for part in turn["parts"]]
    calls = [
        part["functionCall"] for role, part in parts if role == "model" and "functionCall" in part
    ]
    results = [
        part["functionResponse"]
        for role, part in parts
        if role == "user" and "functionResponse" in part
    ]
    assert [(r["name"], r.get("id")) for r in results] == [(c["name"], c.get("id")) for c in calls]
    return (
        [{"name": call["name"], "input": call["args"]} for call in calls],
        [json.dumps(result["response"]) for result in results],
    )


@pytest.mark.parametrize(
    ("subscription", "connection_id"), [("claude", "claude-plan"), ("gemini", "gemini-plan")]
)
def test_gemini_cli_runs_the_shell_tool_the_plan_asks_for(
    start_world: StartWorld, gemini: MakeGemini, subscription: str, connection_id: str
) -> None:
    # Neither plan's terms name the Gemini CLI (a Claude plan's name Claude Code, an
    # Antigravity login's Google's Antigravity clients): both are widened on purpose.
    world = start_world(subscription, tool_calls=[SHELL_CALL], widened=True)

    report = _output(gemini(world).run("Run the command that prints the rungway marker.", "--yolo"))

    sent = inference_requests(world.subscription)
    assert len(sent) == 2, [request.body for request in sent]
    if subscription == "claude":
        offered = {tool["name"] for tool in sent[0].body["tools"]}
        calls, results = _anthropic_tool_turn(sent[1].body)
    else:
        # Antigravity's envelope holds the Gemini request the CLI sent.
        offered = {
            declaration["name"]
            for tool in sent[0].body["request"]["tools"]
            for declaration in tool.get("functionDeclarations", ())
        }
        calls, results = _gemini_tool_turn(sent[1].body["request"])
    assert "run_shell_command" in offered, offered
    assert calls == [SHELL_CALL], calls
    assert len(results) == 1, results
    assert TOOL_MARKER in results[0], results
    # The plan's last turn quotes the tool's output, and the CLI prints it.
    assert TOOL_MARKER in report["response"], report
    assert report["stats"]["tools"]["byName"]["run_shell_command"]["success"] == 1, report
    rows = world.rows()
    assert len(rows) == 2
    assert {(row["rung"], row["connection_id"], row["outcome"]) for row in rows} == {
        ("subscription", connection_id, "ok")
    }
    assert not world.cheap.requests
    _assert_clean_gateway_calls(world)


def test_gemini_cli_climbs_from_an_antigravity_plan_to_the_free_key_to_the_cheap_rung(
    start_world: StartWorld, gemini: MakeGemini
) -> None:
    world = start_world("gemini", widened=True)
    assert world.free is not None
    login = world.subscription.scenario.antigravity
    assert login is not None
    cli = gemini(world)

    report = _output(cli.run("Say hello."))

    assert report["response"].strip() == GEMINI_PLAN_REPLY
    row = _served(world, "subscription", "gemini-plan", tried=set())
    (sent,) = inference_requests(world.subscription)
    assert sent.path == "/v1internal:streamGenerateContent"
    # The same API all the way: the CLI's request goes into Antigravity's envelope, with the
    # login's token and project instead of the client's key.
    assert (sent.body["project"], sent.body["model"]) == (login.project, row["upstream_model"])
    assert (sent.body["userAgent"], sent.body["requestType"]) == ("antigravity", "agent")
    assert set(sent.body["request"]) == CLI_REQUEST_FIELDS
    assert sent.body["request"]["contents"][-1]["parts"][-1] == {"text": "Say hello."}
    assert sent.header("authorization") == f"Bearer {world.subscription.scenario.auth.token}"
    assert sent.header("x-goog-api-key") is None
    _assert_same_usage(report, row)
    assert not world.free.requests
    assert not world.cheap.requests

    world.exhaust_subscription()
    report = _output(cli.run("Say hello again."))

    assert report["response"].strip() == FREE_REPLY
    # The spent plan refused each of its models with a 429 before the free key was asked.
    row = _served(world, "free", "gemini-free", tried={"gemini-plan"})
    (sent,) = inference_requests(world.free)
    assert (sent.path, sent.query) == (
        f"/v1beta/models/{row['upstream_model']}:streamGenerateContent",
        "alt=sse",
    )
    assert sent.header("x-goog-api-key") == world.free.scenario.auth.token != GEMINI_CLIENT_KEY
    assert set(sent.body) == CLI_REQUEST_FIELDS
    assert sent.body["contents"][-1]["parts"][-1] == {"text": "Say hello again."}
    _assert_same_usage(report, row)
    assert not world.cheap.requests

    for window in world.free.scenario.windows:
        world.free.set_window_used(window.name, window.capacity)
    report = _output(cli.run("Say hello once more."))

    assert report["response"].strip() == CHEAP_REPLY
    # The plan's 429s told the gateway its windows are spent: only the free key is asked.
    _served(world, "cheap", "cheap", tried={"gemini-free"})
    (sent,) = inference_requests(world.cheap)
    assert (sent.path, sent.body["model"]) == ("/v1/chat/completions", "deepseek-chat")
    assert "Say hello once more." in json.dumps(sent.body["messages"][-1])
    _assert_clean_gateway_calls(world)


def test_gemini_cli_reports_the_gateways_429_when_no_plan_quota_is_left(
    start_world: StartWorld, gemini: MakeGemini
) -> None:
    world = start_world("gemini", widened=True)
    assert world.free is not None
    world.exhaust_subscription()

    run = gemini(world).run("Say hello.", model="auto/subscription")

    assert run.returncode != 0, run.describe()
    # Headless with JSON output, the CLI ends its stderr with a report of the error.
    report = json.loads(run.stderr[run.stderr.rindex("\n{\n") :])
    assert report["error"]["code"] == 429, run.describe()
    # Antigravity's buckets are per model: each of the plan's models is named spent.
    message = report["error"]["message"]
    assert "gemini-plan (gemini-3-flash): quota_exhausted" in message, run.describe()
    # It read Google's error shape as a quota refusal, and did not try again.
    assert "QuotaError" in run.stderr, run.describe()
    assert world.endpoints() == [
        ("POST", "/v1beta/models/auto/subscription:streamGenerateContent", 429)
    ]
    (row,) = world.rows()
    assert (row["outcome"], row["status"], row["client_key"]) == (
        "subscription_unavailable",
        429,
        "gemini-cli",
    ), row
    # auto/subscription fails closed: nothing reached a rung that bills.
    assert not inference_requests(world.free)
    assert not world.cheap.requests
