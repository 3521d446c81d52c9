"""Simulated OAuth token endpoints, mounted on a sim whose scenario has an `oauth:` section.

Three styles, as the real services answer (docs/provider-signals.md A2.1, A4.1, A5.1):
- `anthropic`: `POST /v1/oauth/token`, a JSON refresh grant; the reply omits a new refresh
  token unless `rotate_refresh_token` is set; an unknown refresh token is `invalid_grant`.
- `codex`: `POST /oauth/token`, JSON or form-encoded; every reply rotates the refresh
  token, and presenting a rotated-away one is refused with `refresh_token_reused`.
- `copilot`: `GET /copilot_internal/v2/token` with `Authorization: token <GitHub token>`
  answers `token`, `expires_at`, `refresh_in` and `endpoints.api`.
- `google`: `POST /token`, Google's form-encoded refresh grant with `client_id` and
  `client_secret` (the Gemini CLI login, A6.1); the reply keeps the refresh token, reports
  `expires_in` a second short of the lifetime (3599) and carries an `id_token`; an unknown
  refresh token is `invalid_grant` / `Bad Request`, a missing client `invalid_client`.

Access tokens it issues are accepted by the sim's API in place of the scenario's own
token until they expire; an expired one (the scenario's own included, once
`access_expires_at` passes or `expire_access_tokens()` is called) gets the API's 401.
Queued faults answer the next token requests: `rate_limited` (429 with `Retry-After`),
`invalid_grant` (the login revoked) and `server_error`.
"""

from __future__ import annotations

import base64
import secrets
import threading
from collections import deque
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qs

import orjson

from rungway.clock import Clock
from rungway.sim.exchange import RecordedRequest, Reply, json_reply
from rungway.sim.oauth.token_spec import OAuthSpec, TokenFault, TokenStyle

PATHS: dict[TokenStyle, tuple[str, str]] = {
    "anthropic": ("POST", "/v1/oauth/token"),
    "codex": ("POST", "/oauth/token"),
    "copilot": ("GET", "/copilot_internal/v2/token"),
    "google": ("POST", "/token"),
}
GOOGLE_SCOPE = (
    "https://www.googleapis.com/auth/cloud-platform "
    "https://www.googleapis.com/auth/userinfo.email "
    "https://www.googleapis.com/auth/userinfo.profile openid"
)
_REJECTED = "expired-by-token-server"
"""What an expired token is swapped for, so the API answers its own 401."""


class TokenServer:
    """Issues and checks access tokens for one simulated upstream; thread-safe."""

    def __init__(self, spec: OAuthSpec, api_token: str, clock: Clock) -> None:
        self.spec = spec
        self._api_token = api_token
        self._clock = clock
        self._lock = threading.Lock()
        self._faults: deque[TokenFault] = deque()
        self._issued: dict[str, float | None] = {}
        self._refresh: set[str] = set()
        self._rotated: set[str] = set()
        self.token_requests = 0
        self.reset()

    def reset(self) -> None:
        """Forget issued tokens and rotations; restore the scenario's faults."""
        with self._lock:
            self._issued = {self._api_token: self.spec.access_expires_at}
            self._refresh = {self.spec.refresh_token}
            self._rotated = set()
            self._faults = deque(self.spec.faults)
            self.token_requests = 0

    def push_fault(self, fault: TokenFault) -> None:
        """Answer a coming token request with `fault`."""
        with self._lock:
            self._faults.append(fault)

    def expire_access_tokens(self) -> None:
        """Expire every access token issued so far (the scenario's own included)."""
        now = self._clock.now()
        with self._lock:
            self._issued = dict.fromkeys(self._issued, now)

    @property
    def refresh_tokens(self) -> set[str]:
        """The refresh tokens the endpoint accepts now."""
        with self._lock:
            return set(self._refresh)

    def serves(self, request: RecordedRequest) -> bool:
        """True for a request to this style's token endpoint."""
        return (request.method, request.path) == PATHS[self.spec.style]

    def admit(self, request: RecordedRequest) -> RecordedRequest:
        """An API request as the API should judge it: an issued token that is still valid
        stands for the scenario's token, an expired one for a token it will refuse."""
        scheme, _, token = (request.header("authorization") or "").partition(" ")
        if scheme.lower() != "bearer":
            return request
        with self._lock:
            if token.strip() not in self._issued:
                return request
            expires_at = self._issued[token.strip()]
        valid = expires_at is None or self._clock.now() < expires_at
        headers = dict(request.headers)
        headers["authorization"] = f"Bearer {self._api_token if valid else _REJECTED}"
        return replace(request, headers=headers)

    def answer(self, request: RecordedRequest) -> Reply:
        """Answer one token request."""
        with self._lock:
            self.token_requests += 1
            fault = self._faults.popleft() if self._faults else None
        if fault is not None:
            return _fault_reply(self.spec.style, fault)
        if self.spec.style == "copilot":
            return self._copilot(request)
        grant = _grant(request)
        presented = str(grant.get("refresh_token") or "")
        if self.spec.style == "google" and not grant.get("client_id"):
            description = "The OAuth client was not found."
            return json_reply(401, {"error": "invalid_client", "error_description": description})
        if grant.get("grant_type") != "refresh_token" or not presented:
            return json_reply(400, {"error": "invalid_request", "error_description": "bad grant"})
        rotate = self.spec.rotate_refresh_token
        rotate = self.spec.style == "codex" if rotate is None else rotate
        with self._lock:
            if presented in self._rotated:
                return _revoked(self.spec.style, reused=True)
            if presented not in self._refresh:
                return _revoked(self.spec.style, reused=False)
            access = self._issue()
            payload: dict[str, Any] = {
                "access_token": access,
                "token_type": "Bearer",
                "expires_in": int(self.spec.access_ttl_s),
            }
            if rotate:
                fresh = "rt-sim-" + secrets.token_hex(16)
                self._refresh = (self._refresh - {presented}) | {fresh}
                self._rotated.add(presented)
                payload["refresh_token"] = fresh
        if self.spec.style == "google":
            # Google reports the lifetime a second short and never rotates the refresh token.
            payload["expires_in"] = max(0, int(self.spec.access_ttl_s) - 1)
            payload["scope"] = GOOGLE_SCOPE
        if self.spec.style in ("codex", "google"):
            payload["id_token"] = _jwt(
                {"email": "sim@example.invalid"}, self._clock.now(), self.spec.access_ttl_s
            )
        else:
            payload["scope"] = "user:inference user:profile"
        return json_reply(200, payload)

    def _copilot(self, request: RecordedRequest) -> Reply:
        scheme, _, github = (request.header("authorization") or "").partition(" ")
        with self._lock:
            if scheme.lower() not in ("token", "bearer") or github.strip() not in self._refresh:
                documentation = "https://docs.github.com/rest"
                return json_reply(
                    401, {"message": "Bad credentials", "documentation_url": documentation}
                )
            token = self._issue()
        now = int(self._clock.now())
        host = request.header("host") or "127.0.0.1"
        return json_reply(
            200,
            {
                "token": token,
                "expires_at": now + int(self.spec.access_ttl_s),
                "refresh_in": max(0, int(self.spec.access_ttl_s) - 300),
                "endpoints": {"api": f"http://{host}"},
                "sku": "monthly_subscriber",
                "chat_enabled": True,
            },
        )

    def _issue(self) -> str:
        # Called with the lock held.
        now = self._clock.now()
        if self.spec.style == "codex":
            claims = {"https://api.openai.com/auth": {"chatgpt_account_id": "sim"}}
            token = _jwt(claims, now, self.spec.access_ttl_s)
        elif self.spec.style == "copilot":
            token = f"tid=sim;exp={int(now + self.spec.access_ttl_s)};sku=monthly_subscriber"
            token += ":" + secrets.token_hex(16)
        elif self.spec.style == "google":
            token = "ya29.sim-" + secrets.token_urlsafe(32)
        else:
            token = "sk-ant-oat01-sim-" + secrets.token_hex(16)
        self._issued[token] = now + self.spec.access_ttl_s
        return token


def _grant(request: RecordedRequest) -> dict[str, Any]:
    if isinstance(request.body, dict):
        return request.body
    form = parse_qs(request.raw_body.decode("latin-1"))
    return {name: values[0] for name, values in form.items()}


def _revoked(style: TokenStyle, *, reused: bool) -> Reply:
    if style == "codex":
        code = "refresh_token_reused" if reused else "refresh_token_expired"
        message = "Your refresh token has already been used to generate a new access token."
        error = {"message": message, "type": "invalid_request_error", "code": code}
        return json_reply(401, {"error": error})
    description = "Bad Request" if style == "google" else "Invalid refresh token"
    return json_reply(400, {"error": "invalid_grant", "error_description": description})


def _fault_reply(style: TokenStyle, fault: TokenFault) -> Reply:
    if fault.kind == "rate_limited":
        headers = ((b"retry-after", str(int(fault.retry_after_s)).encode()),)
        error = {"type": "rate_limit_error", "message": "Rate limited"}
        return json_reply(429, {"error": error}, headers)
    if fault.kind == "invalid_grant":
        return _revoked(style, reused=False)
    return json_reply(500, {"error": {"type": "api_error", "message": "Internal server error"}})


def _jwt(claims: dict[str, Any], now: float, ttl_s: float) -> str:
    # Unsigned: the gateway reads claims (expiry, account) and never checks a signature.
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(orjson.dumps(value)).rstrip(b"=").decode()

    body = {**claims, "exp": int(now + ttl_s), "iat": int(now), "jti": secrets.token_hex(8)}
    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(body)}.sig"
