"""Antigravity (`cloudcode-pa.googleapis.com/v1internal`), with an Antigravity login.

Antigravity speaks Code Assist's envelope (`gemini/code_assist.py`) with its own fields, as
two open gateways send them: `{"project", "model", "userAgent": "antigravity",
"requestType": "agent", "requestId": "agent-<uuid>", "request": {...}}`, plus
`"enabledCreditTypes": ["GOOGLE_ONE_AI"]` when the connection spends AI credits past its
quota (`credits: true` in the config, and the login holds them). Replies are unwrapped as
Code Assist's; a credit-paid reply also carries `remainingCredits`, which is not read.

The client's user agent goes upstream as sent: a connection its terms keep to Antigravity's
clients sees only theirs, and a connection the operator widened sends what its client is.

Quota: each model's bucket from `retrieveUserQuota` (`quota/antigravity.py`), and from its
429s: `QUOTA_EXHAUSTED` spends the model's bucket until its reset, `RATE_LIMIT_EXCEEDED` is
a short throttle unless its delay is long, `INSUFFICIENT_G1_CREDITS_BALANCE` says the
credits are spent (`quota/errors.py`). Whether use past a bucket is paid comes from the
login's credits (`overage_permitted` of each reading).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final, Protocol, runtime_checkable

import orjson

from rungway.adapters.base import Connection, CredentialHeaders, UpstreamCall, UpstreamRequest
from rungway.adapters.connection import ProjectSource
from rungway.adapters.gemini.api import wire_body
from rungway.adapters.gemini.code_assist import GeminiCodeAssistAdapter
from rungway.adapters.shape import RequestShape
from rungway.protocol.failures import Failure, FailureClass
from rungway.quota.antigravity import read_antigravity_quota
from rungway.quota.poller import PollTarget

DEFAULT_BASE_URL: Final = "https://cloudcode-pa.googleapis.com/v1internal"
VERSION: Final = "1.1.5"
"""The `agy` release the gateway names itself as when it asks on its own (one open
gateway's fallback version)."""
USER_AGENT: Final = (
    f"antigravity/cli/{VERSION} (aidev_client; os_type=linux; arch=amd64; auth_method=consumer)"
)
"""The Antigravity CLI's user agent, as one open gateway sends it for `agy` logins."""
CREDIT_TYPES: Final = ("GOOGLE_ONE_AI",)
UNSUPPORTED_CLIENT: Final = b'"UNSUPPORTED_CLIENT"'
"""The `ErrorInfo.reason` of a refused client."""
_DROPPED = frozenset({"safetySettings", "safety_settings"})
"""Fields both open gateways delete before Antigravity sees them."""

ANTIGRAVITY_SHAPE = RequestShape(forwarded=("user-agent",))
"""A Cloud Code request with the client's user agent passed on and the login as a bearer."""


@runtime_checkable
class Credits(ProjectSource, Protocol):
    """A project source that also knows whether the login spends AI credits."""

    def credits_in_use(self) -> bool | None:
        """True when use past the quota is paid from credits; None when not known yet."""
        ...


class AntigravityAdapter(GeminiCodeAssistAdapter):
    """The Gemini API through Antigravity's envelope, at a `.../v1internal` base URL."""

    shape = ANTIGRAVITY_SHAPE

    def build_request(self, call: UpstreamCall) -> UpstreamRequest:
        """POST {base_url}:generateContent (or the streaming method), enveloped."""
        method = ":streamGenerateContent?alt=sse" if call.stream else ":generateContent"
        inner = wire_body(call.body)
        if not _DROPPED.isdisjoint(inner):
            inner = {key: value for key, value in inner.items() if key not in _DROPPED}
        project = call.connection.project
        envelope: dict[str, Any] = {
            "project": project.current() if project is not None else None,
            "model": call.model,
            "userAgent": "antigravity",
            "requestType": "agent",
            "requestId": f"agent-{uuid.uuid4()}",
            "request": inner,
        }
        if isinstance(project, Credits) and project.credits_in_use():
            envelope["enabledCreditTypes"] = list(CREDIT_TYPES)
        return self.shape.request(call, method, orjson.dumps(envelope))

    def classify_failure(self, status: int, headers: Mapping[str, str], body: bytes) -> Failure:
        """Google's failures as Code Assist's, and a refusal of the request's client
        (`UNSUPPORTED_CLIENT`, the simulated Antigravity's; Google's own is not known) as
        `terms`: the login still serves Antigravity's own clients."""
        found = super().classify_failure(status, headers, body)
        if status == 403 and UNSUPPORTED_CLIENT in body:
            return replace(found, kind=FailureClass.TERMS)
        return found

    def usage_target(self, connection: Connection) -> PollTarget | None:
        """`POST {base}:retrieveUserQuota` with `{"project": ...}`, once the project is
        known; each reading says whether the login's credits pay past its buckets."""
        project = connection.project
        if connection.credential() is None or project is None:
            return None

        def body() -> bytes | None:
            found = project.current()
            return None if found is None else orjson.dumps({"project": found})

        def credits() -> bool | None:
            return project.credits_in_use() if isinstance(project, Credits) else None

        headers = CredentialHeaders(
            connection,
            "Bearer",
            {
                "accept": "application/json",
                "content-type": "application/json",
                "user-agent": USER_AGENT,
            },
        )
        return PollTarget(
            connection.id,
            f"{connection.usage_base_url or connection.base_url}:retrieveUserQuota",
            headers,
            lambda reply, now: read_antigravity_quota(reply, now=now, credits=credits()),
            body=body,
        )
