"""A Claude plan serves Claude Code only, through a real gateway in front of a simulated plan
that refuses other clients as Anthropic's servers do.

Another client's request skips the plan with the reason `terms`, in the route plan and the
ledger; widened on purpose, the plan is asked, and its refusal falls through without resting
the login for Claude Code; a plan bound to one client key serves that key alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
from rich.console import Console

from rungway.cli.status import ladder_table
from tests.integration.conftest import (
    CLAUDE,
    CLAUDE_CODE_HEADERS,
    SUBSCRIPTION_TOKEN,
    StartGateway,
    Upstreams,
)

HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]
RULE = "terms: claude plans serve Claude Code only"
SDK_HEADERS = {"x-api-key": "unused", "anthropic-version": "2023-06-01"}


def _send(url: str, model: str, headers: dict[str, str]) -> httpx.Response:
    body = {"model": model, "max_tokens": 32, "messages": HELLO}
    return httpx.post(f"{url}/v1/messages", json=body, headers=headers, timeout=30)


def _plans(url: str, tmp_path: Path, sims: Upstreams, **plan: Any) -> list[dict[str, Any]]:
    (tmp_path / "plan.secret").write_text(SUBSCRIPTION_TOKEN)
    (tmp_path / "api.secret").write_text("sk-ant-api03-integration-key")
    return [
        {
            "id": "plan",
            "provider": "anthropic",
            "auth": "oauth",
            "credential": {"file": str(tmp_path / "plan.secret")},
            "base_url": sims.subscription.url,
            "models": [CLAUDE],
            **plan,
        },
        {
            "id": "api",
            "provider": "anthropic",
            "auth": "apikey",
            "credential": {"file": str(tmp_path / "api.secret")},
            "base_url": url,
            "models": [CLAUDE],
        },
    ]


def _connection(url: str, connection_id: str) -> dict[str, Any]:
    listed = httpx.get(f"{url}/admin/connections").json()["connections"]
    found: dict[str, Any] = next(c for c in listed if c["id"] == connection_id)
    return found


def test_an_sdk_request_skips_the_claude_plan_with_the_terms_reason(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()

    answer = _send(gateway.url, "auto/thrifty", SDK_HEADERS)

    assert answer.status_code == 200, answer.text
    assert answer.headers["x-rungway-connection"] == "cheap"
    assert sims.subscription.requests == [], "the plan was never asked"
    (row,) = gateway.rows()
    (skip,) = [s for s in row["plan"]["skipped"] if s["connection"] == "plan"]
    assert (skip["reason"], skip["detail"], skip["rung"]) == ("terms", RULE, "subscription")
    # Claude Code's own request goes to the plan as before.
    assert (
        _send(gateway.url, "auto/thrifty", {**SDK_HEADERS, **CLAUDE_CODE_HEADERS}).headers[
            "x-rungway-connection"
        ]
        == "plan"
    )


def test_auto_subscription_refuses_another_client_naming_the_terms(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    client = anthropic.Anthropic(base_url=gateway.url, api_key="unused", max_retries=0)

    with pytest.raises(anthropic.APIStatusError) as refused:
        client.messages.create(model="auto/subscription", max_tokens=32, messages=HELLO)

    assert refused.value.status_code == 503
    assert f"plan: terms ({RULE})" in refused.value.message
    assert [r.path for r in sims.subscription.requests] == ["/api/oauth/usage"], "only read"


def test_a_named_model_no_connection_may_serve_for_this_client_is_refused_403(
    start_gateway: StartGateway, sims: Upstreams, tmp_path: Path
) -> None:
    gateway = start_gateway(connections=_plans(sims.api.url, tmp_path, sims)[:1])

    answer = _send(gateway.url, CLAUDE, SDK_HEADERS)

    assert answer.status_code == 403, answer.text
    assert RULE in answer.json()["error"]["message"]
    assert sims.subscription.requests == []


def test_a_widened_plans_refusal_falls_through_and_leaves_the_login_to_claude_code(
    start_gateway: StartGateway, sims: Upstreams, tmp_path: Path
) -> None:
    gateway = start_gateway(connections=_plans(sims.api.url, tmp_path, sims, clients="any"))

    answer = _send(gateway.url, CLAUDE, SDK_HEADERS)

    # The operator let any client use the plan; the plan itself refused this one.
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-rungway-connection"] == "api"
    (refused,) = [r for r in sims.subscription.requests if r.path == "/v1/messages"]
    assert refused.header("user-agent") != CLAUDE_CODE_HEADERS["user-agent"]
    (row,) = gateway.rows()
    attempts = [(a["connection_id"], a["outcome"], a["status"]) for a in row["attempts"]]
    assert attempts == [("plan", "terms", 400)]
    # No cooldown and no breaker: Claude Code is served by the plan at once.
    plan = _connection(gateway.url, "plan")
    assert (plan["cooldown_until"], plan["breaker"]) == (None, "closed")
    served = _send(gateway.url, CLAUDE, {**SDK_HEADERS, **CLAUDE_CODE_HEADERS})
    assert served.headers["x-rungway-connection"] == "plan"


def test_a_plan_bound_to_one_client_key_serves_that_key_alone(
    start_gateway: StartGateway, sims: Upstreams, tmp_path: Path
) -> None:
    keys = {"me": "rw-client-me", "colleague": "rw-client-colleague"}
    for name, key in keys.items():
        (tmp_path / f"{name}.key").write_text(key)
    gateway = start_gateway(
        connections=_plans(sims.api.url, tmp_path, sims, client_key="me"),
        client_keys=[{"name": n, "key": {"file": str(tmp_path / f"{n}.key")}} for n in keys],
    )

    mine = _send(gateway.url, "auto/thrifty", {**CLAUDE_CODE_HEADERS, "x-api-key": keys["me"]})
    theirs = _send(
        gateway.url, "auto/thrifty", {**CLAUDE_CODE_HEADERS, "x-api-key": keys["colleague"]}
    )

    assert mine.headers["x-rungway-connection"] == "plan"
    assert theirs.headers["x-rungway-connection"] == "api"
    row = gateway.rows()[0]
    assert row["client_key"] == "colleague"
    assert [s["reason"] for s in row["plan"]["skipped"] if s["connection"] == "plan"] == [
        "client_key"
    ]


def test_the_admin_api_and_status_show_a_widened_plan_and_its_shared_warning(
    start_gateway: StartGateway, sims: Upstreams, tmp_path: Path
) -> None:
    keys = {"me": "rw-client-me", "colleague": "rw-client-colleague"}
    for name, key in keys.items():
        (tmp_path / f"{name}.key").write_text(key)
    gateway = start_gateway(
        connections=_plans(sims.api.url, tmp_path, sims, clients="any"),
        client_keys=[{"name": n, "key": {"file": str(tmp_path / f"{n}.key")}} for n in keys],
    )

    listed = httpx.get(f"{gateway.url}/admin/connections").json()
    terms = next(c for c in listed["connections"] if c["id"] == "plan")["terms"]

    assert (terms["clients"], terms["widened"], terms["one_person"]) == (
        ["claude-code"],
        True,
        True,
    )
    assert terms["page"] == "https://code.claude.com/docs/en/legal-and-compliance"
    assert "served to 2 client keys" in terms["warning"]
    assert next(c for c in listed["connections"] if c["id"] == "api")["terms"] is None
    console = Console(width=200, record=True)
    console.print(ladder_table(listed["connections"], listed["now"]))
    shown = console.export_text()
    assert "any client, widened by the operator (clients: any)" in shown
