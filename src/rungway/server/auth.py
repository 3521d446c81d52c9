"""Client keys: who may use the gateway, and under which name the ledger records them."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from pydantic import SecretStr


class ClientKeys:
    """The configured client keys; with none configured every request is let in."""

    def __init__(self, keys: Mapping[str, SecretStr]) -> None:
        # Keys are looked up by digest so that comparing them takes the same time
        # whatever prefix a guess shares with a real key.
        self._names = {_digest(secret.get_secret_value()): name for name, secret in keys.items()}

    @property
    def required(self) -> bool:
        """True when requests must present a key."""
        return bool(self._names)

    def identify(self, headers: Mapping[str, str]) -> str | None:
        """The name of the key presented in `authorization` or `x-api-key`, if it is known."""
        presented = headers.get("x-api-key")
        if not presented:
            authorization = headers.get("authorization", "")
            scheme, _, token = authorization.partition(" ")
            presented = token.strip() if scheme.lower() == "bearer" else ""
        if not presented:
            return None
        return self._names.get(_digest(presented))


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()
