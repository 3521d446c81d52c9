"""`TokenManager`: keeps one stored login's access token alive.

It renews the token a margin before it expires and once after an upstream answers 401,
single-flight: however many requests ask at once, one refresh goes out and all of them
await it. A rotated refresh token is written back to the store straight away, since the
old one stops working. A throttled refresh (429 with `Retry-After`) pauses refreshing
until then and keeps the old token while it lasts. A refused grant (`invalid_grant`,
`refresh_token_reused`) marks the login broken, with a message that says how to fix it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

from pydantic import SecretStr

from rungway.clock import Clock
from rungway.credentials.grants import (
    Renewed,
    Revoked,
    Throttled,
    TokenRequest,
    read_refresh,
    refresh_request,
    send_token_request,
)
from rungway.credentials.redaction import add_secrets
from rungway.credentials.store import StoredCredential

log = logging.getLogger("rungway.credentials")

Send = Callable[[TokenRequest], Awaitable[tuple[int, Mapping[str, str], bytes]]]
"""Send a token request: (status, headers, body), or raise OSError."""
Save = Callable[[str, StoredCredential], None]
"""Write a renewed credential back to the store under its name."""

REFRESH_MARGIN_S = 300.0
"""Renew this long before the access token expires."""
PAUSE_AFTER_FAILURE_S = 30.0
"""Wait this long after a refresh that failed for a passing reason (5xx, network)."""


class TokenManager:
    """The live access token of one stored login, renewed as needed."""

    def __init__(
        self,
        name: str,
        credential: StoredCredential,
        *,
        token_url: str,
        clock: Clock,
        save: Save,
        send: Send = send_token_request,
        margin_s: float = REFRESH_MARGIN_S,
    ) -> None:
        self.name = name
        self._credential = credential
        self._url = token_url
        self._clock = clock
        self._save = save
        self._send = send
        self._margin = margin_s
        # A Copilot login's stored token is exchanged for the one sent upstream.
        exchanged = credential.kind == "copilot"
        self._access: str | None = None if exchanged else credential.access_token
        self._expires_at: float | None = None if exchanged else credential.expires_at
        self._inflight: asyncio.Task[bool] | None = None
        self._paused_until = 0.0
        self.broken: str | None = None
        """Why the login no longer works and how to fix it; None while it works."""
        self.refreshes = 0
        """Refresh requests sent so far."""

    @property
    def credential(self) -> StoredCredential:
        """The stored login as it stands now (with any rotated refresh token)."""
        return self._credential

    @property
    def expires_at(self) -> float | None:
        """When the current access token expires (None when unknown)."""
        return self._expires_at

    def current(self) -> SecretStr | None:
        """The access token to send now; starts a renewal in the background when it is due.

        Called on the request path, so it never waits: a token that has already expired
        is still returned, its 401 then awaits the renewal (`refresh_after_unauthorized`).
        """
        if self._due():
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                pass
            else:
                self._start()
        return SecretStr(self._access) if self._access is not None else None

    async def token(self) -> SecretStr | None:
        """The access token, renewed first (and awaited) when it is due."""
        if self._due():
            await self.refresh()
        return SecretStr(self._access) if self._access is not None else None

    async def refresh(self) -> bool:
        """Renew now unless a renewal is paused or the login is broken; single-flight.

        True when a new access token is in hand.
        """
        if self.broken is not None or self._clock.now() < self._paused_until:
            return False
        return await asyncio.shield(self._start())

    async def refresh_after_unauthorized(self, rejected: SecretStr | None) -> str | None:
        """After the upstream refused `rejected`: renew, unless another request already did.

        None when a retry may go out with a new token; otherwise why not, for the operator.
        """
        sent = rejected.get_secret_value() if rejected is not None else None
        if self._inflight is not None and not self._inflight.done():
            await asyncio.shield(self._inflight)
        if self._access is not None and self._access != sent:
            return None
        if await self.refresh():
            return None
        if self.broken is not None:
            return self.broken
        wait = self._paused_until - self._clock.now()
        if wait > 0:
            return f"the token endpoint asked to wait {wait:.0f}s before renewing the login"
        return "the login's access token was refused and could not be renewed"

    def _due(self) -> bool:
        if self.broken is not None or self._clock.now() < self._paused_until:
            return False
        if self._access is None:
            return True
        return self._expires_at is not None and self._clock.now() >= self._expires_at - self._margin

    def _start(self) -> asyncio.Task[bool]:
        if self._inflight is None or self._inflight.done():
            self._inflight = asyncio.get_running_loop().create_task(self._renew())
        return self._inflight

    async def _renew(self) -> bool:
        credential = self._credential
        self.refreshes += 1
        try:
            status, headers, body = await self._send(refresh_request(credential, self._url))
        except OSError as error:
            return self._pause(PAUSE_AFTER_FAILURE_S, str(error))
        now = self._clock.now()
        result = read_refresh(credential, status, headers, body, now)
        if isinstance(result, Renewed):
            self._access, self._expires_at = result.access_token, result.expires_at
            add_secrets(
                value for value in (result.access_token, result.credential.refresh_token) if value
            )
            if result.credential != credential:
                self._credential = result.credential
                # A rotated refresh token replaces the old one for good: keep it at once.
                await asyncio.to_thread(self._save, self.name, result.credential)
            log.info("renewed the access token of login %r", self.name)
            return True
        if isinstance(result, Throttled):
            return self._pause(result.retry_after_s, "throttled (429)")
        if isinstance(result, Revoked):
            self.broken = (
                f"the {credential.kind} login {self.name!r} was refused by its token endpoint "
                f"({result.reason}); re-import the login: rungway connections import "
                f"{credential.kind} --name {self.name}"
            )
            log.error("%s", self.broken)
            return False
        return self._pause(PAUSE_AFTER_FAILURE_S, result.reason)

    def _pause(self, seconds: float, reason: str) -> bool:
        self._paused_until = self._clock.now() + seconds
        log.warning("renewing login %r failed: %s; next try in %.0fs", self.name, reason, seconds)
        return False
