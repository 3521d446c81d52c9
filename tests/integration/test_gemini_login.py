"""A stored Gemini CLI login on Code Assist through a live gateway: its project is found at
start, its access token renews at Google's (simulated) token endpoint with the form grant,
and `auto/subscription` trusts it only on a fresh `retrieveUserQuota` reading."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs

import httpx
import pytest
from cryptography.fernet import Fernet

from rungway.clock import FakeClock
from rungway.credentials.grants import GEMINI_CLIENT_ID
from rungway.credentials.store import KEY_ENV, CredentialStore, StoredCredential
from rungway.sim import SimUpstream, builtin_scenario, load_scenario

from .conftest import START, RunningGateway, StartGateway

FLASH = "gemini-2.5-flash"
HELLO = {"model": FLASH, "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 512}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def plan(clock: FakeClock) -> Iterator[SimUpstream]:
    """The built-in Code Assist scenario, with Google's token endpoint at `/token`."""
    with SimUpstream(load_scenario(builtin_scenario("gemini-code-assist")), clock) as sim:
        yield sim


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plan: SimUpstream) -> CredentialStore:
    key = Fernet.generate_key()
    monkeypatch.setenv(KEY_ENV, key.decode())
    store = CredentialStore(tmp_path / "credentials.enc", key)
    scenario = plan.scenario
    assert scenario.auth is not None
    assert scenario.oauth is not None
    store.put(
        "gemini-plan",
        StoredCredential(
            kind="gemini",
            access_token=scenario.auth.token or "",
            refresh_token=scenario.oauth.refresh_token,
            # Far from expiry as far as the gateway knows: only a 401 says otherwise.
            expires_at=START + 10 * 365 * 86400,
        ),
    )
    return store


def _start(
    start_gateway: StartGateway, plan: SimUpstream, store: CredentialStore
) -> RunningGateway:
    return start_gateway(
        clock=plan.fake_clock,
        credentials={"path": str(store.path)},
        connections=[
            {
                "id": "plan",
                "provider": "gemini-code-assist",
                "auth": "oauth",
                "credential": {"store": "gemini-plan"},
                "base_url": f"{plan.url}/v1internal",
                "token_url": f"{plan.url}/token",
                "models": [FLASH],
                # Reached with httpx, not the Gemini CLI its terms name: widened on purpose.
                "clients": "any",
            }
        ],
    )


def _send(gateway: RunningGateway, model: str = FLASH) -> httpx.Response:
    return httpx.post(
        f"{gateway.url}/v1/chat/completions", json={**HELLO, "model": model}, timeout=30
    )


def _paths(plan: SimUpstream, method: str) -> list[str]:
    return [r.path for r in plan.requests if r.path.endswith(method)]


def test_a_token_refused_at_start_is_renewed_with_googles_grant_before_the_project_is_found(
    start_gateway: StartGateway, plan: SimUpstream, store: CredentialStore
) -> None:
    assert plan.oauth is not None
    plan.oauth.expire_access_tokens()
    gateway = _start(start_gateway, plan, store)

    response = _send(gateway)

    assert response.status_code == 200, response.text
    assert plan.oauth.token_requests == 1
    (grant,) = [r for r in plan.requests if r.path == "/token"]
    form = parse_qs(grant.raw_body.decode())
    assert form["grant_type"] == ["refresh_token"]
    assert form["client_id"] == [GEMINI_CLIENT_ID]
    assert len(_paths(plan, ":loadCodeAssist")) == 2  # refused, then with the new token
    renewed = store.get("gemini-plan")
    generation = next(r for r in plan.requests if r.path.endswith(":generateContent"))
    assert generation.header("authorization") == f"Bearer {renewed.access_token}"
    assert renewed.access_token != (plan.scenario.auth.token if plan.scenario.auth else None)


def test_a_token_that_expires_later_is_renewed_and_the_request_retried(
    start_gateway: StartGateway, plan: SimUpstream, store: CredentialStore
) -> None:
    gateway = _start(start_gateway, plan, store)
    assert _send(gateway).status_code == 200
    assert plan.oauth is not None
    plan.oauth.expire_access_tokens()

    response = _send(gateway)

    assert response.status_code == 200, response.text
    assert plan.oauth.token_requests == 1
    assert len(_paths(plan, ":loadCodeAssist")) == 1  # the project is kept
    rows = gateway.rows()
    assert [(row["outcome"], row["connection_id"]) for row in rows] == [
        ("ok", "plan"),
        ("ok", "plan"),
    ]


def test_auto_subscription_uses_the_plan_on_a_fresh_quota_reading_and_not_once_spent(
    start_gateway: StartGateway, plan: SimUpstream, store: CredentialStore
) -> None:
    gateway = _start(start_gateway, plan, store)
    response = _send(gateway, "auto/subscription")
    assert response.status_code == 200, response.text
    (poll,) = [r for r in plan.requests if r.path.endswith(":retrieveUserQuota")]
    assert poll.method == "POST"
    settings = plan.scenario.code_assist_settings
    assert settings is not None
    assert poll.body == {"project": settings.project}
    assert poll.header("authorization") == f"Bearer {store.get('gemini-plan').access_token}"
    # The day's requests run out elsewhere; once the reading is stale, the next one says so
    # and the plan is left alone without a generation request.
    plan.set_window_used("flash-requests-per-day", 1000)
    plan.fake_clock.advance(600)
    refused = _send(gateway, "auto/subscription")
    assert refused.status_code == 429, refused.text
    assert "subscription_unavailable" in refused.text
    assert len(_paths(plan, ":retrieveUserQuota")) == 2
    assert len(_paths(plan, ":generateContent")) == 1
