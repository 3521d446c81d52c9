"""Reading the logins other tools leave on disk: Claude Code, Codex, GitHub Copilot and the
Gemini CLI.

- Claude Code keeps `~/.claude/.credentials.json` with `claudeAiOauth.{accessToken,
  refreshToken, expiresAt}`, `expiresAt` in milliseconds (docs/provider-signals.md A2.1).
- Codex keeps `~/.codex/auth.json` with `tokens.{access_token, refresh_token, id_token,
  account_id}` and `last_refresh`; the access token is a JWT whose `exp` is its expiry (A4.1).
- A GitHub Copilot login is a `gho_...` GitHub token (A5.1), given as a file holding the
  token, an editor's `apps.json`/`hosts.json` (an `oauth_token` field) or `env:VARIABLE`.
- The Gemini CLI keeps its Google login in `~/.gemini/oauth_creds.json`: `access_token`,
  `refresh_token`, `scope`, `token_type`, `id_token` and `expiry_date` in milliseconds (A6.1).
- An Antigravity (`agy`) login: `credentials/antigravity.py` says what is read.

A parser never puts a token in an error message.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from rungway.credentials import antigravity
from rungway.credentials.store import LoginKind, StoredCredential

DEFAULT_SOURCES: dict[LoginKind, str] = {
    "claude": "~/.claude/.credentials.json",
    "codex": "~/.codex/auth.json",
    "copilot": "~/.config/github-copilot/apps.json",
    "gemini": "~/.gemini/oauth_creds.json",
    "antigravity": antigravity.DEFAULT_TOKEN_FILE,
}


class LoginError(Exception):
    """A login cannot be read; the message says where and what is missing."""


def read_login(kind: LoginKind, source: str | None = None) -> StoredCredential:
    """The login of `kind` at `source` (a path, or `env:VAR` for Copilot), or its default."""
    where = source or (antigravity.default_source() if kind == "antigravity" else None)
    where = where or DEFAULT_SOURCES[kind]
    if kind == "copilot":
        return parse_copilot(_copilot_text(where), where)
    path = Path(where).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise LoginError(f"cannot read {path}: {error.strerror}") from None
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise LoginError(f"{path} is not JSON") from None
    if kind == "claude":
        return parse_claude(document, str(path))
    if kind == "gemini":
        return parse_gemini(document, str(path))
    if kind == "antigravity":
        try:
            return antigravity.parse_antigravity(document, str(path))
        except antigravity.AntigravityLoginError as error:
            raise LoginError(str(error)) from None
    return parse_codex(document, str(path))


def parse_claude(document: Any, source: str) -> StoredCredential:
    """A Claude Code login from its credentials document."""
    oauth = document.get("claudeAiOauth") if isinstance(document, dict) else None
    if not isinstance(oauth, dict):
        raise LoginError(f"{source} has no `claudeAiOauth` object; is this a Claude Code login?")
    access = _text(oauth, "accessToken", source, "claudeAiOauth.")
    refresh = _text(oauth, "refreshToken", source, "claudeAiOauth.")
    expires_ms = oauth.get("expiresAt")
    if expires_ms is not None and not isinstance(expires_ms, int | float):
        raise LoginError(f"{source}: claudeAiOauth.expiresAt is not a number of milliseconds")
    return StoredCredential(
        kind="claude",
        access_token=access,
        refresh_token=refresh,
        expires_at=None if expires_ms is None else float(expires_ms) / 1000,
        source=source,
    )


def parse_codex(document: Any, source: str) -> StoredCredential:
    """A Codex login from its `auth.json` document."""
    tokens = document.get("tokens") if isinstance(document, dict) else None
    if not isinstance(tokens, dict):
        raise LoginError(
            f"{source} has no `tokens` object; log in to Codex with ChatGPT (not an API key)"
        )
    access = _text(tokens, "access_token", source, "tokens.")
    account = tokens.get("account_id")
    id_token = tokens.get("id_token")
    return StoredCredential(
        kind="codex",
        access_token=access,
        refresh_token=_text(tokens, "refresh_token", source, "tokens."),
        expires_at=jwt_expiry(access),
        account_id=account if isinstance(account, str) and account else None,
        id_token=id_token if isinstance(id_token, str) and id_token else None,
        source=source,
    )


def parse_gemini(document: Any, source: str) -> StoredCredential:
    """A Gemini CLI Google login from its `oauth_creds.json` document."""
    if not isinstance(document, dict) or "access_token" not in document:
        raise LoginError(
            f"{source} has no `access_token`; log in to the Gemini CLI with Google (not an API key)"
        )
    expiry_ms = document.get("expiry_date")
    if expiry_ms is not None and not isinstance(expiry_ms, int | float):
        raise LoginError(f"{source}: expiry_date is not a number of milliseconds")
    id_token = document.get("id_token")
    return StoredCredential(
        kind="gemini",
        access_token=_text(document, "access_token", source, ""),
        refresh_token=_text(document, "refresh_token", source, ""),
        expires_at=None if expiry_ms is None else float(expiry_ms) / 1000,
        id_token=id_token if isinstance(id_token, str) and id_token else None,
        source=source,
    )


def parse_copilot(text: str, source: str) -> StoredCredential:
    """A GitHub token for Copilot: the whole text, or an `oauth_token` inside JSON."""
    token = text.strip()
    if token.startswith("{"):
        try:
            document = orjson.loads(token)
        except orjson.JSONDecodeError:
            raise LoginError(f"{source} is neither a token nor JSON") from None
        found = next(_oauth_tokens(document), None)
        if found is None:
            raise LoginError(f"{source} has no `oauth_token` field")
        token = found
    if not token or any(character.isspace() for character in token):
        raise LoginError(f"{source} does not hold a single GitHub token")
    if not token.startswith(("gho_", "ghu_", "github_pat_", "ghp_")):
        raise LoginError(f"{source} does not hold a GitHub token (gho_..., ghu_... or ghp_...)")
    return StoredCredential(kind="copilot", access_token=token, source=source)


def jwt_expiry(token: str) -> float | None:
    """The `exp` claim of a JWT, unverified (None when the token is not a JWT)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    encoded = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = orjson.loads(base64.urlsafe_b64decode(encoded))
    except (binascii.Error, ValueError):
        return None
    expiry = claims.get("exp") if isinstance(claims, dict) else None
    return float(expiry) if isinstance(expiry, int | float) else None


def _copilot_text(where: str) -> str:
    if where.startswith("env:"):
        variable = where.removeprefix("env:")
        value = os.environ.get(variable, "")
        if not value.strip():
            raise LoginError(f"environment variable {variable} is not set or empty")
        return value
    path = Path(where).expanduser()
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise LoginError(f"cannot read {path}: {error.strerror}") from None


def _oauth_tokens(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        value = node.get("oauth_token")
        if isinstance(value, str) and value:
            yield value
        for child in node.values():
            yield from _oauth_tokens(child)
    elif isinstance(node, list):
        for child in node:
            yield from _oauth_tokens(child)


def _text(fields: dict[str, Any], name: str, source: str, prefix: str) -> str:
    value = fields.get(name)
    if not isinstance(value, str) or not value.strip():
        raise LoginError(f"{source}: {prefix}{name} is missing or empty; log in again")
    return value.strip()
