"""The Codex CLI (`codex exec`) through the gateway's Responses API: the plan, then the ladder."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.clients.conftest import (
    CHEAP_REPLY,
    CODEX_REPLY,
    Codex,
    StartWorld,
    World,
    inference_requests,
)

pytestmark = pytest.mark.clients

MakeCodex = Callable[[World], Codex]


def test_codex_is_served_by_the_codex_plan_and_then_by_the_cheap_rung(
    start_world: StartWorld, codex: MakeCodex
) -> None:
    world = start_world("codex")
    cli = codex(world)

    run = cli.run("Say hello.")

    assert run.returncode == 0, run.describe()
    assert CODEX_REPLY in run.stdout, run.describe()
    rows = world.rows()
    assert rows, "the gateway recorded no request"
    for row in rows:
        assert (row["rung"], row["connection_id"], row["outcome"]) == (
            "subscription",
            "codex-plan",
            "ok",
        ), row
        assert row["api"] == "openai_responses"
        assert row["client_key"] == "codex", "the CLI's env_key named the client key"
    sent = inference_requests(world.subscription)
    assert [request.path for request in sent] == ["/backend-api/codex/responses"] * len(rows)
    assert not world.cheap.requests
    served_by_subscription = len(rows)

    world.exhaust_subscription()
    run = cli.run("Say hello again.")

    assert run.returncode == 0, run.describe()
    assert CHEAP_REPLY in run.stdout, run.describe()
    rows = world.rows()
    rows = rows[: len(rows) - served_by_subscription]
    assert rows, "the second run recorded no request"
    for row in rows:
        assert (row["rung"], row["connection_id"], row["outcome"]) == ("cheap", "cheap", "ok"), row
        assert row["api"] == "openai_responses", "the client still spoke the Responses API"
    sent = inference_requests(world.cheap)
    assert [request.path for request in sent] == ["/v1/chat/completions"] * len(rows)
    assert all(request.body["model"] == "deepseek-chat" for request in sent)
    calls = world.endpoints()
    assert {(method, path) for method, path, _ in calls} == {("POST", "/v1/responses")}, calls
    assert all(status == 200 for _, _, status in calls), calls
