"""The ChatGPT plan's Codex backend: the Responses API at `chatgpt.com/backend-api/codex`.

A Codex login authenticates with its OAuth access token as a bearer and names the
workspace in `ChatGPT-Account-Id`, read from the token's own claims (docs/provider-signals.md
A4.1). The backend takes only what the first-party Codex client sends (A4.2): it needs
`instructions` (empty is fine), refuses storage and non-streamed requests, and rejects
sampling and output caps, so those are dropped; encrypted reasoning is asked for so that
reasoning survives `store: false`. Every request therefore streams upstream, and a client
that asked for no stream needs its reply assembled from the stream (`assemble_stream`).

Quota comes from the `x-codex-*` headers (A4.3), the `usage_limit_reached` 429 with its
`resets_at` (A4.5) and `GET {backend}/wham/usage` (A4.4).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from typing import Any

import orjson

from rungway.adapters.base import Connection, CredentialHeaders, UpstreamCall, UpstreamRequest
from rungway.adapters.openai.errors import error_object
from rungway.adapters.openai.responses import OpenAIResponsesAdapter, assemble_response
from rungway.adapters.shape import JSON, RequestShape
from rungway.protocol.failures import Failure, FailureClass
from rungway.quota import (
    OverageReading,
    read_codex,
    read_codex_credits,
    read_codex_error,
    read_codex_usage,
)
from rungway.quota.poller import PollTarget
from rungway.routing.snapshot import QuotaWindow

DEFAULT_ORIGINATOR = "codex_cli_rs"
RESPONSES_BETA = "responses=experimental"
ENCRYPTED_REASONING = "reasoning.encrypted_content"
AUTH_CLAIM = "https://api.openai.com/auth"
# Parameters the backend rejects or ignores (A4.2): it answers `max_output_tokens` with
# 400 "Unsupported parameter", and the first-party client never sends the others.
_DROPPED_FIELDS = frozenset(
    {"temperature", "top_p", "top_k", "max_output_tokens", "stream_options"}
)
CODEX_SHAPE = RequestShape(
    # The first-party client's identity and turn headers, passed on as sent.
    forwarded=("user-agent", "originator", "session_id", "session-id", "version", "x-codex-"),
    fixed=(*JSON, ("accept", "text/event-stream"), ("openai-beta", RESPONSES_BETA)),
    defaults=(("originator", DEFAULT_ORIGINATOR),),
)
"""The backend's headers: the client's identity, SSE, the Responses beta, the token."""


class CodexAdapter(OpenAIResponsesAdapter):
    """Responses at a Codex backend base URL (`https://chatgpt.com/backend-api/codex`)."""

    versioned_base_url = False
    shape = CODEX_SHAPE

    def build_request(self, call: UpstreamCall) -> UpstreamRequest:
        """POST {base_url}/responses, always streamed, with the body the backend accepts,
        naming the token's workspace in `ChatGPT-Account-Id`."""
        body = orjson.dumps(codex_body(call.body, call.model))
        request = self.shape.request(call, "/responses", body)
        credential = call.connection.credential()
        if credential is not None:
            account = chatgpt_account_id(credential.get_secret_value())
            if account is not None:
                request.headers["chatgpt-account-id"] = account
        return request

    def classify_failure(self, status: int, headers: Mapping[str, str], body: bytes) -> Failure:
        """A spent plan is quota exhaustion, a plan that lacks the model is unavailable."""
        failure = super().classify_failure(status, headers, body)
        error = error_object(body)
        kind = str(error.get("type") or error.get("code") or "")
        if status == 429 and kind == "usage_limit_reached":
            wait = error.get("resets_in_seconds")
            wait_s = float(wait) if isinstance(wait, int | float) else failure.retry_after_s
            return replace(failure, kind=FailureClass.QUOTA_EXHAUSTED, retry_after_s=wait_s)
        if kind == "usage_not_included":
            # The plan does not cover this request or model: no wait changes that (A4.5).
            return replace(failure, kind=FailureClass.MODEL_UNAVAILABLE, retry_after_s=None)
        if "model is at capacity" in failure.message.lower():
            # "Selected model is at capacity. Please try a different model" (A4.5).
            return replace(failure, kind=FailureClass.OVERLOADED)
        return failure

    def read_quota(
        self, connection: Connection, *, model: str, headers: Mapping[str, str], now: float
    ) -> tuple[QuotaWindow, ...]:
        """The plan's windows from the `x-codex-*` headers."""
        return read_codex(headers, now=now)

    def read_overage(self, connection: Connection, headers: Mapping[str, str]) -> OverageReading:
        """Whether credits pay past the plan, from the `x-codex-credits-*` headers (A4.3)."""
        return read_codex_credits(headers)

    def error_windows(
        self,
        connection: Connection,
        *,
        status: int,
        headers: Mapping[str, str],
        body: bytes,
        model: str,
        now: float,
    ) -> tuple[QuotaWindow, ...]:
        """The window a `usage_limit_reached` 429 shows spent, until its `resets_at`."""
        return read_codex_error(status, body, now=now).windows

    def usage_target(self, connection: Connection) -> PollTarget | None:
        """`GET {backend}/wham/usage` (`{base}/api/codex/usage` off the ChatGPT backend)."""
        if connection.secret is None:
            return None
        token = connection.secret.get_secret_value()
        base = connection.usage_base_url or connection.base_url.removesuffix("/codex")
        # The first-party client picks the path by whether the base is the backend (A4.4).
        path = "/wham/usage" if "/backend-api" in base else "/api/codex/usage"
        fixed = {"accept": "application/json"}
        account = chatgpt_account_id(token)
        if account is not None:
            # The workspace stays the same when the token is renewed.
            fixed["chatgpt-account-id"] = account
        headers = CredentialHeaders(connection, "Bearer", fixed)
        return PollTarget(
            connection.id,
            f"{base}{path}",
            headers,
            lambda body, now: read_codex_usage(body, now=now),
        )

    def assemble_stream(self, body: bytes) -> dict[str, Any] | Failure:
        """The `response` object for a client that asked for no stream (see the module)."""
        return assemble_response(body)


def codex_body(body: Mapping[str, Any], model: str) -> dict[str, Any]:
    """The client's Responses body as the backend takes it (A4.2)."""
    payload = {key: value for key, value in body.items() if key not in _DROPPED_FIELDS}
    payload["model"] = model
    if not isinstance(payload.get("instructions"), str):
        payload["instructions"] = ""
    payload["store"] = False
    payload["stream"] = True
    include = payload.get("include")
    include = [*include] if isinstance(include, list) else []
    if ENCRYPTED_REASONING not in include:
        include.append(ENCRYPTED_REASONING)
    payload["include"] = include
    return payload


@lru_cache(maxsize=32)
def chatgpt_account_id(token: str) -> str | None:
    """The workspace id in an access token's `https://api.openai.com/auth` claim (A4.1).

    None when the token is not a JWT or names no account. The signature is not checked:
    the backend does that, and the gateway only reads which account the token is for.
    """
    parts = token.split(".")
    if len(parts) != 3:
        return None
    encoded = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = orjson.loads(base64.urlsafe_b64decode(encoded))
    except (binascii.Error, ValueError):
        return None
    auth = claims.get(AUTH_CLAIM) if isinstance(claims, dict) else None
    account = auth.get("chatgpt_account_id") if isinstance(auth, dict) else None
    return account if isinstance(account, str) and account else None
