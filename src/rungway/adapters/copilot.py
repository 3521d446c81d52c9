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

from rungway.adapters.base import Connection, UpstreamRequest
from rungway.adapters.openai_chat import OpenAIChatAdapter
from rungway.protocol.failures import Failure, FailureClass
from rungway.quota.poller import PollTarget
from rungway.quota.usage import read_copilot_user
from rungway.routing.snapshot import QuotaWindow

GITHUB_API = "https://api.github.com"
API_VERSION = "2025-04-01"
_EDITOR_HEADERS = {
    "copilot-integration-id": "vscode-chat",
    "editor-version": "vscode/1.95.0",
    "editor-plugin-version": "copilot-chat/0.26.7",
    "openai-intent": "conversation-panel",
    "x-github-api-version": API_VERSION,
}
_DEFAULT_USER_AGENT = "GitHubCopilotChat/0.26.7"


class CopilotAdapter(OpenAIChatAdapter):
    """Chat Completions at a Copilot API base URL (`https://api.githubcopilot.com`)."""

    versioned_base_url = False

    def build_request(
        self,
        connection: Connection,
        *,
        body: dict[str, Any],
        raw_body: bytes,
        upstream_model: str,
        client_headers: Mapping[str, str],
        query: str,
    ) -> UpstreamRequest:
        """The OpenAI-compatible request, with the editor headers Copilot expects."""
        request = super().build_request(
            connection,
            body=body,
            raw_body=raw_body,
            upstream_model=upstream_model,
            client_headers=client_headers,
            query=query,
        )
        headers = request.headers
        headers.update(_EDITOR_HEADERS)
        headers.setdefault("user-agent", _DEFAULT_USER_AGENT)
        headers["x-initiator"] = _initiator(body)
        if _has_image(body):
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
