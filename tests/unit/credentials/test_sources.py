"""Connections read a stored login's token at request time, usage polls included, and
connections naming one login share its manager."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr

from rungway.adapters.anthropic.messages import AnthropicMessagesAdapter
from rungway.adapters.base import Connection
from rungway.clock import FakeClock
from rungway.config import parse_settings
from rungway.credentials.sources import login_sources
from rungway.credentials.store import KEY_ENV, CredentialStore, StoredCredential
from rungway.protocol.auth import Auth
from tests.unit.adapters.calls import call_of


class Rotating:
    """A source whose token the test replaces."""

    def __init__(self, token: str) -> None:
        self.token = token

    def current(self) -> SecretStr | None:
        return SecretStr(self.token)

    async def refresh_after_unauthorized(self, rejected: SecretStr | None) -> str | None:
        return None


def test_a_source_wins_over_the_secret_read_at_start_in_requests_and_usage_polls() -> None:
    source = Rotating("sk-ant-oat01-first")
    subscription = Connection(
        "plan",
        "anthropic",
        Auth.OAUTH,
        SecretStr("sk-ant-oat01-first"),
        "http://up",
        frozenset({"m"}),
        source=source,
    )
    adapter = AnthropicMessagesAdapter()
    target = adapter.usage_target(subscription)
    assert target is not None
    assert target.headers["authorization"] == "Bearer sk-ant-oat01-first"
    source.token = "sk-ant-oat01-renewed"
    assert subscription.credential() == SecretStr("sk-ant-oat01-renewed")
    assert dict(target.headers)["authorization"] == "Bearer sk-ant-oat01-renewed"
    assert dict(target.headers)["anthropic-beta"] == "oauth-2025-04-20"
    request = adapter.build_request(call_of(subscription, {"model": "m"}, raw=b'{"model":"m"}'))
    assert request.headers["authorization"] == "Bearer sk-ant-oat01-renewed"


def test_connections_naming_one_login_share_its_manager(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = Fernet.generate_key()
    monkeypatch.setenv(KEY_ENV, key.decode())
    store = CredentialStore(tmp_path / "c.enc", key)
    store.put("max", StoredCredential(kind="claude", access_token="a", refresh_token="r"))
    store.put("bare", StoredCredential(kind="claude", access_token="b"))
    store.put("seat", StoredCredential(kind="copilot", access_token="gho_0123456789ab"))

    def connection(cid: str, name: str, provider: str = "anthropic") -> dict[str, object]:
        return {
            "id": cid,
            "provider": provider,
            "auth": "oauth",
            "credential": {"store": name},
            "models": ["m"],
        }

    settings = parse_settings(
        {
            "credentials": {"path": str(tmp_path / "c.enc")},
            "connections": [
                connection("one", "max"),
                {**connection("two", "max"), "token_url": "http://127.0.0.1:9/t"},
                connection("three", "bare"),
                connection("four", "seat", "copilot"),
            ],
        }
    )
    sources = login_sources(settings, FakeClock(0))
    assert set(sources) == {"one", "two", "four"}  # a login with no refresh token stays static
    assert sources["one"] is sources["two"]
    assert sources["four"].credential.kind == "copilot"
