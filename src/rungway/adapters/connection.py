"""A configured connection as adapters see it: who it is, where it goes, what it sends.

Its credential may renew itself while the gateway runs (`SecretSource`), and a Code Assist
style login names a project found once by asking the upstream (`ProjectSource`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from pydantic import SecretStr

from rungway.protocol.auth import Auth


class SecretSource(Protocol):
    """A credential that can change while the gateway runs (a renewed OAuth token)."""

    def current(self) -> SecretStr | None:
        """The secret to send now; never waits."""
        ...

    async def refresh_after_unauthorized(self, rejected: SecretStr | None) -> str | None:
        """Renew after the upstream refused `rejected`: None when a retry may go out,
        otherwise why not, in words for the operator."""
        ...


class ProjectSource(Protocol):
    """The Google Cloud project a Gemini Code Assist login works in, found by asking the
    upstream once (`loadCodeAssist`, then `onboardUser` when it names none)."""

    def current(self) -> str | None:
        """The project id, or None while it is not known; never waits."""
        ...

    async def discover(self) -> str | None:
        """The project id, asked for first when not yet known; None when it cannot be
        found now, with `problem` saying why."""
        ...

    @property
    def problem(self) -> str | None:
        """Why the last discovery found no project (None when it did, or never ran)."""
        ...


@dataclass(frozen=True, slots=True)
class Connection:
    """A configured connection, ready to use: its credential is read and its URL resolved.

    `secret` is the credential as read at start; a `source` (a stored login that renews
    itself) supplies the one to send at request time instead.
    """

    id: str
    provider: str
    auth: Auth
    secret: SecretStr | None
    base_url: str
    models: frozenset[str]
    usage_base_url: str | None = None
    source: SecretSource | None = None
    project: ProjectSource | None = None
    """The Code Assist project the requests name (Gemini Code Assist logins only)."""
    proxy: str | None = None
    """The connection's `proxy:` setting: a proxy URL, or `direct`; None leaves the choice
    to the environment's proxy variables."""

    def credential(self) -> SecretStr | None:
        """The secret to send upstream now."""
        return self.source.current() if self.source is not None else self.secret


class CredentialHeaders(Mapping[str, str]):
    """Request headers whose `authorization` is read from the connection at each use.

    A usage endpoint is polled for as long as the gateway runs, so its headers must carry
    the token that is current at each poll, not the one read at start.
    """

    __slots__ = ("_connection", "_fixed", "_scheme")

    def __init__(self, connection: Connection, scheme: str, fixed: Mapping[str, str]) -> None:
        self._connection = connection
        self._scheme = scheme
        self._fixed = dict(fixed)

    def _now(self) -> dict[str, str]:
        secret = self._connection.credential()
        if secret is None:
            return self._fixed
        return {"authorization": f"{self._scheme} {secret.get_secret_value()}", **self._fixed}

    def __getitem__(self, name: str) -> str:
        return self._now()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._now())

    def __len__(self) -> int:
        return len(self._now())
