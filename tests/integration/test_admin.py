"""The admin API and `rungway connections`: the ladder's live state, and clearing a cooldown."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from rungway.sim import HttpErrorFault

from .conftest import CLAUDE, RunningGateway, StartGateway, Upstreams

HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]
ADMIN_KEY = "rw-admin-integration"


def _served_by(gateway: RunningGateway, model: str = "auto/thrifty") -> str:
    with anthropic.Anthropic(base_url=gateway.url, api_key="unused", max_retries=0) as client:
        raw = client.messages.with_raw_response.create(model=model, max_tokens=64, messages=HELLO)
    return raw.headers["x-rungway-connection"]


def _connections(gateway: RunningGateway, **headers: str) -> dict[str, dict[str, Any]]:
    response = httpx.get(f"{gateway.url}/admin/connections", headers=headers)
    assert response.status_code == 200, response.text
    return {entry["id"]: entry for entry in response.json()["connections"]}


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rungway", "connections", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", **(env or {})},
    )


def test_connections_show_billing_windows_and_cooldown(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    assert _served_by(gateway) == "plan"
    plan = _connections(gateway)["plan"]
    assert (plan["provider"], plan["billing"], plan["overage"]) == (
        "anthropic",
        "subscription",
        "hard-stop",
    )
    assert plan["models"] == [{"model": CLAUDE, "rung": "subscription", "tier": "premium"}]
    assert [window["name"] for window in plan["windows"]] == ["5h"]
    assert all(window["source"] == "header" for window in plan["windows"])
    assert plan["cooldown_until"] is None
    assert plan["breaker"] == "closed"


def test_an_operator_clears_a_cooldown_from_the_cli(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    sims.plan.push_fault(HttpErrorFault(status=529, retry_after_s=600))
    assert _served_by(gateway) == "cheap", "the plan's 529 falls through to the next rung"
    cooling = _connections(gateway)["plan"]
    assert cooling["cooldown_until"] is not None
    assert cooling["cooldown_reason"].startswith("overloaded")
    assert _served_by(gateway) == "cheap", "the plan rests"

    listed = _cli("list", "--url", gateway.url)
    assert listed.returncode == 0, listed.stderr
    assert "plan" in listed.stdout
    assert "overloaded" in listed.stdout

    done = _cli("clear-cooldown", "plan", "--url", gateway.url)
    assert done.returncode == 0, done.stderr
    assert "cleared the cooldown of plan" in done.stdout
    assert _connections(gateway)["plan"]["cooldown_until"] is None
    assert _served_by(gateway) == "plan"

    again = _cli("clear-cooldown", "plan", "--url", gateway.url)
    assert again.returncode == 0
    assert "was not cooling down" in again.stdout


def test_unknown_connections_and_wrong_methods_get_clear_errors(
    start_gateway: StartGateway,
) -> None:
    gateway = start_gateway()
    missing = httpx.post(f"{gateway.url}/admin/connections/nope/clear-cooldown")
    assert missing.status_code == 404
    assert "no connection 'nope'; known: plan, api, cheap, backup" in missing.text
    wrong = httpx.get(f"{gateway.url}/admin/connections/plan/clear-cooldown")
    assert wrong.status_code == 405
    assert httpx.delete(f"{gateway.url}/admin/connections").status_code == 405
    assert httpx.get(f"{gateway.url}/admin/nothing").status_code == 404
    no_endpoint = httpx.post(f"{gateway.url}/admin/connections/cheap/refresh-quota")
    assert no_endpoint.status_code == 409
    assert "no usage endpoint" in no_endpoint.text
    done = _cli("clear-cooldown", "nope", "--url", gateway.url)
    assert done.returncode == 1
    assert "HTTP 404" in done.stderr


def test_refresh_quota_reads_a_plan_usage_endpoint_now(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    response = httpx.post(f"{gateway.url}/admin/connections/plan/refresh-quota")
    assert response.status_code == 200, response.text
    windows = response.json()["windows"]
    assert [window["name"] for window in windows] == ["5h"]
    assert {window["source"] for window in windows} == {"poll"}
    assert [request.path for request in sims.plan.requests] == ["/api/oauth/usage"]


def test_an_admin_key_guards_the_admin_api(
    start_gateway: StartGateway, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNGWAY_IT_ADMIN", ADMIN_KEY)
    gateway = start_gateway(admin={"key": {"env": "RUNGWAY_IT_ADMIN"}})
    refused = httpx.get(f"{gateway.url}/admin/connections")
    assert refused.status_code == 401
    assert "admin key" in refused.json()["error"]["message"]
    wrong = httpx.get(f"{gateway.url}/admin/connections", headers={"authorization": "Bearer wrong"})
    assert wrong.status_code == 401
    assert "plan" in _connections(gateway, authorization=f"Bearer {ADMIN_KEY}")
    denied = _cli("list", "--url", gateway.url)
    assert denied.returncode == 1
    assert "HTTP 401" in denied.stderr
    allowed = _cli("list", "--url", gateway.url, env={"RUNGWAY_ADMIN_KEY": ADMIN_KEY})
    assert allowed.returncode == 0, allowed.stderr
