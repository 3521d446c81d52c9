"""The simulated token endpoints over HTTP: Claude, Codex and Copilot styles, with faults."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from rungway.clock import FakeClock
from rungway.credentials.grants import (
    Renewed,
    Revoked,
    Throttled,
    read_refresh,
    refresh_request,
    send_token_request,
)
from rungway.credentials.store import StoredCredential
from rungway.sim import Scenario, SimUpstream
from rungway.sim.oauth.token_spec import TokenFault

from .conftest import CLAUDE_CODE_HEADERS

START = 1_790_000_000.0
SUBSCRIPTION_TOKEN = "sk-ant-oat01-sim-initial"


def _sim(style: str, api: str = "anthropic", **oauth: Any) -> SimUpstream:
    scenario = Scenario.model_validate(
        {
            "name": f"oauth-{style}",
            "api": api,
            "auth": {"kind": "bearer", "token": SUBSCRIPTION_TOKEN},
            "models": [{"id": "m"}],
            "oauth": {"style": style, "refresh_token": "rt-initial", **oauth},
        }
    )
    return SimUpstream(scenario, FakeClock(START))


@pytest.fixture
def claude() -> Iterator[SimUpstream]:
    with _sim("anthropic") as sim:
        yield sim


def _refresh(sim: SimUpstream, credential: StoredCredential, path: str) -> object:
    async def run() -> object:
        request = refresh_request(credential, sim.url + path)
        status, headers, body = await send_token_request(request)
        return read_refresh(credential, status, headers, body, START)

    return asyncio.run(run())


def _message(sim: SimUpstream, token: str) -> int:
    response = httpx.post(
        f"{sim.url}/v1/messages",
        headers={
            "authorization": f"Bearer {token}",
            "anthropic-version": "2023-06-01",
            **CLAUDE_CODE_HEADERS,
        },
        json={"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]},
    )
    return response.status_code


CLAUDE_LOGIN = StoredCredential(
    kind="claude", access_token=SUBSCRIPTION_TOKEN, refresh_token="rt-initial"
)


def test_an_issued_claude_token_is_accepted_and_the_expired_one_refused(
    claude: SimUpstream,
) -> None:
    assert _message(claude, SUBSCRIPTION_TOKEN) == 200
    renewed = _refresh(claude, CLAUDE_LOGIN, "/v1/oauth/token")
    assert isinstance(renewed, Renewed)
    assert renewed.access_token.startswith("sk-ant-oat01-sim-")
    assert renewed.credential.refresh_token == "rt-initial"  # not rotated by default
    assert renewed.expires_at == START + 3600
    assert _message(claude, renewed.access_token) == 200
    assert claude.oauth is not None
    claude.oauth.expire_access_tokens()
    assert _message(claude, SUBSCRIPTION_TOKEN) == 401
    assert _message(claude, renewed.access_token) == 401


def test_an_unknown_refresh_token_is_invalid_grant_and_faults_come_first(
    claude: SimUpstream,
) -> None:
    assert claude.oauth is not None
    claude.oauth.push_fault(TokenFault(kind="rate_limited", retry_after_s=42))
    claude.oauth.push_fault(TokenFault(kind="invalid_grant"))
    assert _refresh(claude, CLAUDE_LOGIN, "/v1/oauth/token") == Throttled(42.0)
    assert _refresh(claude, CLAUDE_LOGIN, "/v1/oauth/token") == Revoked("invalid_grant")
    assert isinstance(_refresh(claude, CLAUDE_LOGIN, "/v1/oauth/token"), Renewed)
    stranger = StoredCredential(kind="claude", access_token="x", refresh_token="rt-unknown")
    assert _refresh(claude, stranger, "/v1/oauth/token") == Revoked("invalid_grant")
    assert claude.oauth.token_requests == 4


def test_codex_rotates_refresh_tokens_and_refuses_a_reused_one() -> None:
    with _sim("codex", api="responses") as sim:
        login = StoredCredential(
            kind="codex", access_token=SUBSCRIPTION_TOKEN, refresh_token="rt-initial"
        )
        first = _refresh(sim, login, "/oauth/token")
        assert isinstance(first, Renewed)
        assert first.credential.refresh_token not in (None, "rt-initial")
        assert first.credential.id_token is not None
        assert first.expires_at == START + 3600
        assert _refresh(sim, login, "/oauth/token") == Revoked("refresh_token_reused")
        assert isinstance(_refresh(sim, first.credential, "/oauth/token"), Renewed)


def test_copilot_exchanges_a_github_token_for_an_api_token() -> None:
    with _sim("copilot", api="openai", access_ttl_s=1800) as sim:
        github = StoredCredential(kind="copilot", access_token="rt-initial")
        exchanged = _refresh(sim, github, "/copilot_internal/v2/token")
        assert isinstance(exchanged, Renewed)
        assert exchanged.access_token.startswith("tid=sim;")
        assert exchanged.expires_at == START + 1500 + 60
        raw = httpx.get(
            f"{sim.url}/copilot_internal/v2/token", headers={"authorization": "token rt-initial"}
        ).json()
        assert raw["endpoints"]["api"].startswith("http://127.0.0.1:")
        assert raw["expires_at"] == int(START) + 1800
        chat = httpx.post(
            f"{sim.url}/v1/chat/completions",
            headers={"authorization": f"Bearer {exchanged.access_token}"},
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert chat.status_code == 200
        stranger = StoredCredential(kind="copilot", access_token="gho_unknown")
        assert _refresh(sim, stranger, "/copilot_internal/v2/token") == Revoked("HTTP 401")


def test_oauth_needs_a_bearer_scenario() -> None:
    with pytest.raises(ValueError, match="oauth needs auth kind bearer"):
        Scenario.model_validate(
            {
                "name": "bad",
                "api": "anthropic",
                "auth": {"kind": "x-api-key", "token": "k"},
                "models": [{"id": "m"}],
                "oauth": {"style": "anthropic", "refresh_token": "r"},
            }
        )
