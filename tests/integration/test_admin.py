"""The admin API and `rungway connections`: the ladder's live state, and clearing a cooldown."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from rungway.sim import HttpErrorFault
from tests.integration.conftest import CLAUDE_CODE_HEADERS

from .conftest import CLAUDE, DEEPSEEK, RunningGateway, StartGateway, Upstreams

HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]
ADMIN_KEY = "rw-admin-integration"


def _served_by(gateway: RunningGateway, model: str = "auto/thrifty") -> str:
    with anthropic.Anthropic(
        base_url=gateway.url, api_key="unused", max_retries=0, default_headers=CLAUDE_CODE_HEADERS
    ) as client:
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
    subscription = _connections(gateway)["plan"]
    assert (subscription["provider"], subscription["billing"], subscription["overage"]) == (
        "anthropic",
        "subscription",
        "hard-stop",
    )
    assert subscription["models"] == [{"model": CLAUDE, "rung": "subscription", "tier": "premium"}]
    assert [window["name"] for window in subscription["windows"]] == ["5h"]
    assert all(window["source"] == "header" for window in subscription["windows"])
    assert subscription["cooldown_until"] is None
    assert subscription["breaker"] == "closed"


def test_an_operator_clears_a_cooldown_from_the_cli(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    sims.subscription.push_fault(HttpErrorFault(status=529, retry_after_s=600))
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
    assert [request.path for request in sims.subscription.requests] == ["/api/oauth/usage"]


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


def test_recent_requests_list_newest_first_and_open_with_their_route_plan(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    sims.subscription.push_fault(HttpErrorFault(status=529, retry_after_s=600))
    assert _served_by(gateway) == "cheap"
    assert _served_by(gateway, "fast") == "cheap"
    listed = httpx.get(f"{gateway.url}/admin/requests")
    assert listed.status_code == 200, listed.text
    rows = listed.json()["requests"]
    assert [row["requested_model"] for row in rows] == ["fast", "auto/thrifty"]
    newest, oldest = rows
    assert newest["resolved_model"] == DEEPSEEK
    assert newest["attempts"] == []
    assert newest["stream"] is False
    assert newest["tokens"]["output"] == 24
    assert "plan" not in newest
    assert [attempt["connection_id"] for attempt in oldest["attempts"]] == ["plan"]
    assert oldest["attempts"][0]["status"] == 529
    assert [row["request_id"] for row in _requests(gateway, limit="1")] == [newest["request_id"]]

    detail = httpx.get(f"{gateway.url}/admin/requests/{oldest['request_id']}")
    assert detail.status_code == 200, detail.text
    body = detail.json()
    assert body["request_id"] == oldest["request_id"]
    assert body["plan"]["ladder"] == "thrifty"
    assert body["plan"]["candidates"][0]["connections"] == ["plan"]
    assert {key: value for key, value in body.items() if key != "plan"} == oldest


def _requests(gateway: RunningGateway, **params: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{gateway.url}/admin/requests", params=params)
    assert response.status_code == 200, response.text
    rows: list[dict[str, Any]] = response.json()["requests"]
    return rows


@pytest.mark.parametrize("query", ["limit=0", "limit=501", "limit=ten", "limit=", "since=1"])
def test_a_bad_requests_query_gets_a_400(start_gateway: StartGateway, query: str) -> None:
    gateway = start_gateway()
    response = httpx.get(f"{gateway.url}/admin/requests?{query}")
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request"


def test_a_unique_prefix_finds_a_request_and_an_ambiguous_one_lists_its_matches(
    start_gateway: StartGateway,
) -> None:
    gateway = start_gateway()
    assert _served_by(gateway, "fast") == "cheap"
    (first,) = _requests(gateway)
    # Eight characters are the millisecond the request began: enough to name it.
    unique = httpx.get(f"{gateway.url}/admin/requests/{first['request_id'][:8].upper()}")
    assert unique.status_code == 200, unique.text
    assert unique.json()["request_id"] == first["request_id"]
    assert _served_by(gateway, "fast") == "cheap"
    second = _requests(gateway)[0]
    pairs = zip(first["request_id"], second["request_id"], strict=True)
    shared = "".join(a for a, _ in itertools.takewhile(lambda pair: pair[0] == pair[1], pairs))
    assert shared, "ids minted a moment apart share their leading time characters"
    assert httpx.get(f"{gateway.url}/admin/requests/nothing-like-it").status_code == 404
    ambiguous = httpx.get(f"{gateway.url}/admin/requests/{shared}")
    assert ambiguous.status_code == 409
    body = ambiguous.json()
    assert body["error"]["type"] == "ambiguous"
    assert "2 request ids start with" in body["error"]["message"]
    assert [row["request_id"] for row in body["matches"]] == [
        first["request_id"],
        second["request_id"],
    ]
    assert httpx.post(f"{gateway.url}/admin/requests").status_code == 405


def test_a_disabled_connection_leaves_the_ladder_and_named_models_until_enabled(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    done = _cli("disable", "plan", "--url", gateway.url)
    assert done.returncode == 0, done.stderr
    assert "disabled plan" in done.stdout
    assert _connections(gateway)["plan"]["disabled"] is True
    assert "disabled" in _cli("list", "--url", gateway.url).stdout
    assert _served_by(gateway) == "cheap", "thrifty steps past the disabled plan"
    assert _served_by(gateway, CLAUDE) == "api", "a named model skips it too"
    with (
        anthropic.Anthropic(
            base_url=gateway.url,
            api_key="unused",
            max_retries=0,
            default_headers=CLAUDE_CODE_HEADERS,
        ) as client,
        pytest.raises(anthropic.APIStatusError) as refused,
    ):
        client.messages.create(model="auto/subscription", max_tokens=64, messages=HELLO)
    assert refused.value.status_code == 503
    assert "disabled" in str(refused.value.body)
    assert sims.subscription.requests == [], "not even its usage endpoint is read"
    named = httpx.get(
        f"{gateway.url}/admin/requests/{_requests(gateway, limit='2')[1]['request_id']}"
    )
    skips = [(s["connection"], s["reason"]) for s in named.json()["plan"]["skipped"]]
    assert skips == [("plan", "disabled")]

    again = _cli("disable", "plan", "--url", gateway.url)
    assert "already disabled" in again.stdout
    enabled = _cli("enable", "plan", "--url", gateway.url)
    assert enabled.returncode == 0, enabled.stderr
    assert "enabled plan" in enabled.stdout
    assert _connections(gateway)["plan"]["disabled"] is False
    assert _served_by(gateway) == "plan"
    assert "was not disabled" in _cli("enable", "plan", "--url", gateway.url).stdout


def test_disabling_every_connection_of_a_named_model_names_them_in_a_503(
    start_gateway: StartGateway,
) -> None:
    gateway = start_gateway()
    for connection_id in ("cheap", "backup"):
        assert httpx.post(f"{gateway.url}/admin/connections/{connection_id}/disable").is_success
    response = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        json={"model": "fast", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert response.status_code == 503
    message = response.json()["error"]["message"]
    assert "disabled (cheap, backup)" in message
    assert "rungway connections enable" in message
    assert httpx.post(f"{gateway.url}/admin/connections/nope/disable").status_code == 404
    assert httpx.get(f"{gateway.url}/admin/connections/cheap/enable").status_code == 405
