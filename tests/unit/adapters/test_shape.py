"""What every upstream request shares: the URL under the base, which client headers go on,
the credential in the header its `Auth` calls for, and the connection's proxy.

The registry-wide tests hold for every provider, the ones added later included.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import SecretStr

from rungway.adapters.base import Connection
from rungway.adapters.registry import PROVIDERS
from rungway.adapters.shape import JSON, RequestShape
from rungway.protocol.api import Api
from rungway.protocol.auth import Auth
from tests.unit.adapters.calls import call_of

SHAPE = RequestShape(
    forwarded=("user-agent", "x-acme-"),
    key_header="x-api-key",
    fixed=(*JSON, ("accept", "text/event-stream")),
    defaults=(("user-agent", "AcmeCLI/1.0"),),
)
KEY = Connection(
    "acme", "acme", Auth.APIKEY, SecretStr("sk-acme"), "http://up/v1", frozenset({"m"})
)
LOGIN = replace(KEY, auth=Auth.OAUTH, secret=SecretStr("oauth-token"))
CLIENT_CREDENTIALS = {
    "authorization": "Bearer key-for-the-gateway",
    "x-api-key": "key-for-the-gateway",
    "x-goog-api-key": "key-for-the-gateway",
}
BODIES: dict[Api, dict[str, Any]] = {
    Api.OPENAI_CHAT: {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    Api.OPENAI_RESPONSES: {"model": "m", "input": "hi"},
    Api.ANTHROPIC_MESSAGES: {"model": "m", "max_tokens": 5, "messages": []},
    Api.GEMINI: {"model": "m", "stream": False, "contents": []},
}


def test_a_key_goes_in_the_shapes_key_header_and_a_login_as_a_bearer() -> None:
    keyed = SHAPE.headers(call_of(KEY, {}))
    assert keyed["x-api-key"] == "sk-acme"
    assert "authorization" not in keyed
    login = SHAPE.headers(call_of(LOGIN, {}))
    assert login["authorization"] == "Bearer oauth-token"
    assert "x-api-key" not in login
    bearer = replace(SHAPE, key_header="authorization").headers(call_of(KEY, {}))
    assert bearer["authorization"] == "Bearer sk-acme"


def test_fixed_headers_win_over_the_clients_and_defaults_give_way_to_them() -> None:
    client = {"accept": "application/json", "x-acme-session": "s1", "cookie": "c"}
    headers = SHAPE.headers(call_of(KEY, {}, headers=client))
    assert headers["accept"] == "text/event-stream"
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"] == "AcmeCLI/1.0"
    assert headers["x-acme-session"] == "s1"
    assert "cookie" not in headers
    own = SHAPE.headers(call_of(KEY, {}, headers={"user-agent": "Client/2"}))
    assert own["user-agent"] == "Client/2"


def test_a_connection_without_a_credential_sends_none() -> None:
    keyless = replace(KEY, auth=Auth.NONE, secret=None)
    headers = SHAPE.headers(call_of(keyless, {}, headers=CLIENT_CREDENTIALS))
    assert not {"authorization", "x-api-key", "x-goog-api-key"} & headers.keys()


def test_a_request_goes_under_the_base_url_through_the_connections_proxy() -> None:
    proxied = replace(KEY, proxy="http://proxy:3128")
    request = SHAPE.request(call_of(proxied, {}), "/chat/completions", b"{}")
    assert request.url == "http://up/v1/chat/completions"
    assert request.proxy == "http://proxy:3128"
    assert request.body == b"{}"
    assert SHAPE.request(call_of(KEY, {}), "/x", b"{}").proxy is None


def _connection(provider: str, auth: Auth, proxy: str | None = None) -> Connection:
    secret = SecretStr("sk-connection")
    return Connection(
        f"{provider}-c", provider, auth, secret, "http://up/base", frozenset({"m"}), proxy=proxy
    )


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_every_provider_sends_its_connections_proxy(provider: str) -> None:
    adapter = PROVIDERS[provider].adapter
    connection = _connection(provider, Auth.APIKEY, proxy="socks5://proxy:1080")
    call = call_of(connection, BODIES[adapter.api])
    assert adapter.build_request(call).proxy == "socks5://proxy:1080"
    counted = adapter.count_tokens_request(call)
    assert counted is None or counted.proxy == "socks5://proxy:1080"


@pytest.mark.parametrize("auth", [Auth.APIKEY, Auth.OAUTH])
@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_no_provider_passes_on_the_credential_a_client_gave_the_gateway(
    provider: str, auth: Auth
) -> None:
    adapter = PROVIDERS[provider].adapter
    call = call_of(_connection(provider, auth), BODIES[adapter.api], headers=CLIENT_CREDENTIALS)
    sent = adapter.build_request(call).headers
    assert "key-for-the-gateway" not in " ".join(sent.values())
    assert "sk-connection" in " ".join(sent.values())


@given(
    st.dictionaries(
        st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=20),
        st.text("abcxyz0123 /.", max_size=20),
        max_size=8,
    )
)
def test_only_forwarded_client_headers_go_upstream(client: dict[str, str]) -> None:
    headers = SHAPE.headers(call_of(KEY, {}, headers=client))
    ours = {name for name, _ in (*SHAPE.fixed, *SHAPE.defaults)} | {"x-api-key"}
    for name, value in headers.items():
        if name not in ours:
            assert name.startswith(SHAPE.forwarded)
            assert client[name] == value
