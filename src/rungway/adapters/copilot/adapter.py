"""GitHub Copilot seats: Chat Completions at the Copilot API, quota at `copilot_internal/user`.

Copilot expects the editor identity headers its own clients send, and counts a premium
request per user turn, which `X-Initiator` tells apart from an agent's follow-up turns
(docs/provider-signals.md A5.2). The seat's monthly premium-request allowance and whether use
past it is billed (`overage_permitted`) come from `GET /copilot_internal/user` on the
GitHub API host (A5.3), not on the Copilot API host. A spent allowance without overage is
answered 402 `quota_exceeded` ("You have no quota"), as users of the chat API report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from rungway.adapters.base import Connection, UpstreamCall, UpstreamRequest
from rungway.adapters.openai.chat import OPENAI_SHAPE, OpenAIChatAdapter
from rungway.protocol.failures import Failure, FailureClass
from rungway.quota.poller import PollTarget
from rungway.quota.usage import read_copilot_user
from rungway.routing.snapshot import QuotaWindow

GITHUB_API = "https://api.github.com"
API_VERSION = "2025-04-01"
COPILOT_SHAPE = replace(
    OPENAI_SHAPE,
    fixed=(
        *OPENAI_SHAPE.fixed,
        ("copilot-integration-id", "vscode-chat"),
        ("editor-version", "vscode/1.95.0"),
        ("editor-plugin-version", "copilot-chat/0.26.7"),
        ("openai-intent", "conversation-panel"),
        ("x-github-api-version", API_VERSION),
    ),
    defaults=(("user-agent", "GitHubCopilotChat/0.26.7"),),
)
"""An OpenAI request with the editor identity Copilot's own clients send."""


class CopilotAdapter(OpenAIChatAdapter):
    """Chat Completions at a Copilot API base URL (`https://api.githubcopilot.com`)."""

    versioned_base_url = False
    shape = COPILOT_SHAPE

    def build_request(self, call: UpstreamCall) -> UpstreamRequest:
        """The OpenAI-compatible request, saying who started the turn and whether it shows
        an image."""
        request = super().build_request(call)
        headers = request.headers
        headers["x-initiator"] = _initiator(call.body)
        if _has_image(call.body):
            headers["copilot-vision-request"] = "true"
        return request

    def classify_failure(self, status: int, headers: Mapping[str, str], body: bytes) -> Failure:
        """A 402 `quota_exceeded` is the seat's spent allowance; the rest as OpenAI."""
        failure = super().classify_failure(status, headers, body)
        if status == 402 and b"quota_exceeded" in body:
            # The allowance comes back at the monthly reset, which the usage endpoint gives.
            return replace(failure, kind=FailureClass.QUOTA_EXHAUSTED)
        return failure

    def read_quota(
        self, connection: Connection, *, model: str, headers: Mapping[str, str], now: float
    ) -> tuple[QuotaWindow, ...]:
        """Copilot answers carry no quota headers; the seat is read from its usage endpoint."""
        return ()

    def usage_target(self, connection: Connection) -> PollTarget | None:
        """`GET /copilot_internal/user` on the GitHub API (or `usage_base_url`)."""
        if connection.secret is None:
            return None
        headers = {
            "authorization": f"token {connection.secret.get_secret_value()}",
            "accept": "application/json",
            "x-github-api-version": API_VERSION,
        }
        base = connection.usage_base_url or GITHUB_API
        return PollTarget(
            connection.id,
            f"{base}/copilot_internal/user",
            headers,
            lambda body, now: read_copilot_user(body, now=now),
        )


def _initiator(body: Mapping[str, Any]) -> str:
    # A turn that carries an assistant or tool message continues an agent's work; only a
    # user-initiated turn should count as a premium request.
    messages = body.get("messages")
    if isinstance(messages, list) and any(
        isinstance(message, dict) and message.get("role") in ("assistant", "tool")
        for message in messages
    ):
        return "agent"
    return "user"


def _has_image(body: Mapping[str, Any]) -> bool:
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(part, dict) and part.get("type") == "image_url" for part in content
        ):
            return True
    return False
