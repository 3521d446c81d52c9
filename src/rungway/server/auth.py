"""Client keys: who may use the gateway, and under which name the ledger records them."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from urllib.parse import parse_qs, parse_qsl, urlencode

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

    def identify(self, headers: Mapping[str, str], query: str = "") -> str | None:
        """The name of the key presented, if it is known: in `x-api-key`, `authorization`
        (bearer), Google's `x-goog-api-key`, or Google's `?key=` query parameter."""
        presented = headers.get("x-api-key") or headers.get("x-goog-api-key")
        if not presented:
            authorization = headers.get("authorization", "")
            scheme, _, token = authorization.partition(" ")
            presented = token.strip() if scheme.lower() == "bearer" else ""
        if not presented and "key=" in query:
            presented = query_key(query) or ""
        if not presented:
            return None
        return self._names.get(_digest(presented))


def query_key(query: str) -> str | None:
    """The `key` parameter of a query string, as Google's API clients may send the key."""
    values = parse_qs(query).get("key")
    return values[0] if values else None


def without_key(query: str) -> str:
    """`query` without its `key` parameter, so a client key is never kept or passed on."""
    if "key=" not in query:
        return query
    return urlencode([(name, value) for name, value in parse_qsl(query) if name != "key"])


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()
