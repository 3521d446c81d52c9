"""The GLM Coding Plan (Z.ai): Chat Completions at its coding endpoint, or Anthropic
Messages where Claude Code is pointed, with a plan key.

The plan answers only at `https://api.z.ai/api/coding/paas/v4` (Chat Completions, the key a
bearer) and `https://api.z.ai/api/anthropic` (Messages, the key in `x-api-key`), and at the
same paths on `open.bigmodel.cn` in China: the general `/api/paas/v4` endpoint bills a
platform balance and refuses a plan key with 1113. Every quota and rate error is HTTP 429
with a business code (`rungway.quota.glm`): a spent window (1308, 1310, 1316-1321) is
quota exhaustion until the reset its message names, an expired plan (1309) or an empty
balance (1113) is billing, 1305 is an overloaded service and any other 429 a short rate
limit. The windows are polled from `GET /api/monitor/usage/quota/limit` on the API's host.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from urllib.parse import urlsplit

from rungway.adapters.anthropic.messages import AnthropicMessagesAdapter
from rungway.adapters.base import Connection, CredentialHeaders
from rungway.adapters.openai.chat import OpenAIChatAdapter
from rungway.protocol.failures import Failure, FailureClass
from rungway.quota import NO_OVERAGE, OverageReading
from rungway.quota.glm import (
    ENDED_CODES,
    SPENT_CODES,
    glm_error_code,
    read_glm_error,
    read_glm_usage,
)
from rungway.quota.poller import PollTarget
from rungway.routing.snapshot import QuotaWindow

DEFAULT_BASE_URL = "https://api.z.ai/api/coding/paas/v4"
ANTHROPIC_BASE_URL = "https://api.z.ai/api/anthropic"
QUOTA_PATH = "/api/monitor/usage/quota/limit"
_OVERLOADED_CODE = "1305"


def by_business_code(failure: Failure, status: int, body: bytes) -> Failure:
    """`failure` as its API family classified it, corrected by a 429's business code."""
    if status != 429:
        return failure
    code, _ = glm_error_code(body)
    if code in SPENT_CODES:
        return replace(failure, kind=FailureClass.QUOTA_EXHAUSTED)
    if code in ENDED_CODES:
        return replace(failure, kind=FailureClass.BILLING, retry_after_s=None)
    if code == _OVERLOADED_CODE:
        return replace(failure, kind=FailureClass.OVERLOADED)
    return replace(failure, kind=FailureClass.RATE_LIMITED)


class _GlmPlan:
    """What both of the plan's endpoints share: its error windows and its quota endpoint."""

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
        """The window a spent-window 429 names, until the reset in its message."""
        return read_glm_error(status, body, now=now).windows

    def usage_target(self, connection: Connection) -> PollTarget | None:
        """`GET {host}/api/monitor/usage/quota/limit` (`usage_base_url` replaces the host)."""
        if connection.secret is None and connection.source is None:
            return None
        parts = urlsplit(connection.base_url)
        host = connection.usage_base_url or f"{parts.scheme}://{parts.netloc}"
        headers = CredentialHeaders(connection, "Bearer", {"accept": "application/json"})
        return PollTarget(
            connection.id,
            f"{host.rstrip('/')}{QUOTA_PATH}",
            headers,
            lambda body, now: read_glm_usage(body, now=now),
        )


class GlmCodingAdapter(_GlmPlan, OpenAIChatAdapter):
    """Chat Completions at a GLM Coding Plan base URL (`.../api/coding/paas/v4`)."""

    def classify_failure(self, status: int, headers: Mapping[str, str], body: bytes) -> Failure:
        """A 429 by its business code (see the module); the rest as OpenAI."""
        return by_business_code(super().classify_failure(status, headers, body), status, body)


class GlmAnthropicAdapter(_GlmPlan, AnthropicMessagesAdapter):
    """Messages at a GLM Coding Plan base URL (`.../api/anthropic`)."""

    def classify_failure(self, status: int, headers: Mapping[str, str], body: bytes) -> Failure:
        """A 429 by its business code (see the module); the rest as Anthropic."""
        return by_business_code(super().classify_failure(status, headers, body), status, body)

    def read_quota(
        self, connection: Connection, *, model: str, headers: Mapping[str, str], now: float
    ) -> tuple[QuotaWindow, ...]:
        """Z.ai's answers carry no quota headers; the plan is read from its quota endpoint."""
        return ()

    def read_overage(self, connection: Connection, headers: Mapping[str, str]) -> OverageReading:
        """The plan never bills past its windows."""
        return NO_OVERAGE
