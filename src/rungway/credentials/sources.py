"""Turning the config's stored logins into live token managers, one per connection."""

from __future__ import annotations

from collections.abc import Callable

from rungway.clock import Clock
from rungway.config import ConnectionConfig, Settings
from rungway.credentials.grants import TOKEN_URLS, send_token_request
from rungway.credentials.manager import Send, TokenManager
from rungway.credentials.secrets import open_store


def login_sources(
    settings: Settings,
    clock: Clock,
    send_for: Callable[[ConnectionConfig], Send] | None = None,
) -> dict[str, TokenManager]:
    """A token manager for each connection whose credential is a renewable stored login.

    A stored Claude or Codex login renews with its refresh token; a stored Copilot token
    is exchanged for the short-lived token Copilot's API takes. Several connections that
    name one login share its manager, so they share one refresh, sent the way `send_for`
    says for the first of them (its proxy).
    """
    named = [
        (connection, connection.credential.store)
        for connection in settings.connections
        if connection.credential is not None and connection.credential.store is not None
    ]
    if not named:
        return {}
    store = open_store(settings.credentials)
    managers: dict[str, TokenManager] = {}
    sources: dict[str, TokenManager] = {}
    for connection, name in named:
        assert name is not None
        credential = store.get(name)
        if credential.kind != "copilot" and credential.refresh_token is None:
            continue
        if name not in managers:
            managers[name] = TokenManager(
                name,
                credential,
                token_url=connection.token_url or TOKEN_URLS[credential.kind],
                clock=clock,
                save=store.put,
                send=send_token_request if send_for is None else send_for(connection),
            )
        sources[connection.id] = managers[name]
    return sources
