"""A stored Claude login whose access token expires: the gateway renews it at the token
endpoint and retries, or says how to fix a revoked login."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet

from rungway.clock import FakeClock
from rungway.credentials.store import KEY_ENV, CredentialStore, StoredCredential
from rungway.sim import Scenario, SimUpstream
from rungway.sim.oauth.token_spec import TokenFault
from tests.integration.conftest import CLAUDE_CODE_HEADERS

from .conftest import CLAUDE, START, StartGateway

OLD_TOKEN = "sk-ant-oat01-refresh-test-old-access"
REFRESH_TOKEN = "sk-ant-ort01-refresh-test-refresh"
HELLO: dict[str, Any] = {
    "model": CLAUDE,
    "max_tokens": 32,
    "messages": [{"role": "user", "content": "Say hello."}],
}


@pytest.fixture
def login_subscription() -> Iterator[SimUpstream]:
    """A Claude plan whose token endpoint renews the login (not rotating refresh tokens)."""
    scenario = Scenario.model_validate(
        {
            "name": "login-plan",
            "api": "anthropic",
            "quota_headers": "anthropic-unified",
            "auth": {"kind": "bearer", "token": OLD_TOKEN},
            "models": [{"id": CLAUDE, "context_window": 200000, "max_output_tokens": 8192}],
            "windows": [
                {"name": "5h", "claim": "five_hour", "capacity": 100000, "length_s": 18000}
            ],
            "oauth": {"style": "anthropic", "refresh_token": REFRESH_TOKEN},
        }
    )
    with SimUpstream(scenario, FakeClock(START)) as sim:
        yield sim


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CredentialStore:
    key = Fernet.generate_key()
    monkeypatch.setenv(KEY_ENV, key.decode())
    store = CredentialStore(tmp_path / "credentials.enc", key)
    store.put(
        "claude-max",
        StoredCredential(
            kind="claude",
            access_token=OLD_TOKEN,
            refresh_token=REFRESH_TOKEN,
            # Far from expiry as far as the gateway knows: only the 401 says otherwise.
            expires_at=START + 10 * 365 * 86400,
        ),
    )
    return store


def _expiring(store: CredentialStore, expires_at: float) -> None:
    store.put(
        "claude-max",
        StoredCredential(
            kind="claude",
            access_token=OLD_TOKEN,
            refresh_token=REFRESH_TOKEN,
            expires_at=expires_at,
        ),
    )


def _start(start_gateway: StartGateway, subscription: SimUpstream, store: CredentialStore) -> Any:
    return start_gateway(
        credentials={"path": str(store.path)},
        connections=[
            {
                "id": "plan",
                "provider": "anthropic",
                "auth": "oauth",
                "credential": {"store": "claude-max"},
                "base_url": subscription.url,
                "token_url": f"{subscription.url}/v1/oauth/token",
                "models": [CLAUDE],
            }
        ],
    )


def _send(url: str) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/messages",
        headers={"x-api-key": "unused", "anthropic-version": "2023-06-01", **CLAUDE_CODE_HEADERS},
        json=HELLO,
        timeout=10,
    )


def test_an_expired_token_is_renewed_and_the_request_retried_once(
    start_gateway: StartGateway, login_subscription: SimUpstream, store: CredentialStore
) -> None:
    gateway = _start(start_gateway, login_subscription, store)
    assert _send(gateway.url).status_code == 200
    assert login_subscription.oauth is not None
    login_subscription.oauth.expire_access_tokens()

    response = _send(gateway.url)

    assert response.status_code == 200, response.text
    assert login_subscription.oauth.token_requests == 1
    sent = [
        r.header("authorization") for r in login_subscription.requests if r.path == "/v1/messages"
    ]
    assert sent[:2] == [f"Bearer {OLD_TOKEN}"] * 2
    assert sent[2] is not None
    assert sent[2].startswith("Bearer sk-ant-oat01-sim-")
    rows = gateway.rows()
    assert [(row["outcome"], row["status"]) for row in rows] == [("ok", 200), ("ok", 200)]
    assert rows[0]["attempts"] == []  # the refused first try is not a failed attempt
    renewed = store.get("claude-max")
    assert f"Bearer {renewed.access_token}" == sent[2]
    assert renewed.refresh_token == REFRESH_TOKEN  # the reply sent none: the old one stays
    # The renewed token serves the next request without another refresh.
    assert _send(gateway.url).status_code == 200
    assert login_subscription.oauth.token_requests == 1


def test_a_revoked_login_fails_with_how_to_re_import_it(
    start_gateway: StartGateway, login_subscription: SimUpstream, store: CredentialStore
) -> None:
    gateway = _start(start_gateway, login_subscription, store)
    assert login_subscription.oauth is not None
    login_subscription.oauth.push_fault(TokenFault(kind="invalid_grant"))
    login_subscription.oauth.expire_access_tokens()

    response = _send(gateway.url)

    assert response.status_code == 502
    message = response.json()["error"]["message"]
    assert "invalid_grant" in message
    assert "re-import the login: rungway connections import claude --name claude-max" in message
    assert OLD_TOKEN not in response.text
    assert REFRESH_TOKEN not in response.text
    # Broken stays broken: no further refresh is attempted. The refused login rests its
    # connection, so the next request is answered at once, still naming the fix.
    sent = len(login_subscription.requests)
    again = _send(gateway.url)
    assert (again.status_code, again.json()["error"]["code"]) == (429, "connections_resting")
    assert again.headers["retry-after"] == "600"
    assert "re-import the login: rungway connections import claude" in again.text
    assert login_subscription.oauth.token_requests == 1
    assert len(login_subscription.requests) == sent


def test_a_token_near_expiry_is_renewed_in_the_background_before_it_fails(
    start_gateway: StartGateway, login_subscription: SimUpstream, store: CredentialStore
) -> None:
    _expiring(store, time.time() + 60)  # inside the five-minute margin
    gateway = _start(start_gateway, login_subscription, store)
    assert _send(gateway.url).status_code == 200  # sent with the old, still valid token
    assert login_subscription.oauth is not None
    deadline = time.monotonic() + 5
    while login_subscription.oauth.token_requests == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert login_subscription.oauth.token_requests == 1
    renewed = _wait_for_renewal(store)
    assert _send(gateway.url).status_code == 200
    sent = [
        r.header("authorization") for r in login_subscription.requests if r.path == "/v1/messages"
    ]
    assert sent == [f"Bearer {OLD_TOKEN}", f"Bearer {renewed}"]
    assert login_subscription.oauth.token_requests == 1


def test_a_throttled_refresh_is_not_retried_before_retry_after(
    start_gateway: StartGateway, login_subscription: SimUpstream, store: CredentialStore
) -> None:
    gateway = _start(start_gateway, login_subscription, store)
    assert login_subscription.oauth is not None
    login_subscription.oauth.push_fault(TokenFault(kind="rate_limited", retry_after_s=600))
    login_subscription.oauth.expire_access_tokens()

    first = _send(gateway.url)
    second = _send(gateway.url)

    # The refused refresh rests the connection: the second request is answered at once.
    assert (first.status_code, second.status_code) == (502, 429)
    assert re.search(r"asked to wait (599|600)s", first.json()["error"]["message"])
    assert second.json()["error"]["code"] == "connections_resting"
    assert login_subscription.oauth.token_requests == 1
    assert store.get("claude-max").access_token == OLD_TOKEN


def _wait_for_renewal(store: CredentialStore) -> str:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        token = store.get("claude-max").access_token
        if token != OLD_TOKEN:
            return token
        time.sleep(0.02)
    raise AssertionError("the login was not renewed")
