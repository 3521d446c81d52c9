"""OpenRouter: Chat Completions, with its own credit errors and key endpoint.

A 402 means the account is out of credits, even on a `:free` model when the balance is
negative; only a 402 from the in-flight budget, with `Retry-After`, is worth waiting for
(docs/provider-signals.md A7). `GET /key` reports the key's credit limit, which the poller
reads as a "credits" window.
"""

from __future__ import annotations

from collections.abc import Mapping

from rungway.adapters.base import Connection, retry_after_seconds
from rungway.adapters.openai.chat import OpenAIChatAdapter
from rungway.protocol.failures import Failure, FailureClass
from rungway.quota import read_openrouter_error
from rungway.quota.poller import PollTarget
from rungway.quota.usage import read_openrouter_key
from rungway.routing.snapshot import QuotaWindow


class OpenRouterAdapter(OpenAIChatAdapter):
    """Chat Completions at OpenRouter."""

    def classify_failure(self, status: int, headers: Mapping[str, str], body: bytes) -> Failure:
        """A 402 is billing unless the in-flight budget asks for a wait; the rest as OpenAI."""
        failure = super().classify_failure(status, headers, body)
        if status != 402:
            return failure
        if read_openrouter_error(status, headers, body, now=0.0).terminal:
            return failure
        return Failure(
            FailureClass.RATE_LIMITED,
            failure.message,
            status=status,
            retry_after_s=retry_after_seconds(headers),
            body=body,
        )

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
        """The request window a 429 shows exhausted, from its `X-RateLimit-*` headers."""
        return read_openrouter_error(status, headers, body, now=now).windows

    def usage_target(self, connection: Connection) -> PollTarget | None:
        """`GET /key`: the key's credit limit and what remains of it."""
        if connection.secret is None:
            return None
        base = connection.usage_base_url or connection.base_url
        return PollTarget(
            connection.id,
            f"{base}/key",
            {"authorization": f"Bearer {connection.secret.get_secret_value()}"},
            lambda body, now: read_openrouter_key(body, now=now),
        )
