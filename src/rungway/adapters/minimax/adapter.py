"""The MiniMax Token Plan: the Anthropic Messages API at `https://api.minimax.io/anthropic`.

A plan key (`sk-cp-...`) is sent as `x-api-key`; a pay-as-you-go key (`sk-api-...`)
draws on another balance and is refused on plan use. A spent window answers 429
`rate_limit_error` whose message ends with MiniMax's code 2056 and names its reset
("... 5-hour usage limit reached ..., resets at 2026-05-15T15:00:00Z (2056)"); a plain
429 without the code is a rate limit. The plan's windows come from
`GET /v1/token_plan/remains` on the API host (docs/provider-signals.md, MiniMax Token Plan).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from urllib.parse import urlsplit

from rungway.adapters.anthropic.messages import AnthropicMessagesAdapter
from rungway.adapters.base import Connection, CredentialHeaders
from rungway.protocol.failures import Failure, FailureClass
from rungway.quota import NO_OVERAGE, OverageReading
from rungway.quota.minimax import (
    CODING_PLAN_PATH,
    TOKEN_PLAN_PATH,
    minimax_error_code,
    read_minimax_remains,
)
from rungway.quota.poller import PollTarget
from rungway.quota.resets import parse_reset
from rungway.routing.snapshot import QuotaWindow, WindowStatus

DEFAULT_BASE_URL = "https://api.minimax.io/anthropic"
PLAN_LIMIT_CODE = 2056
_AUTH_CODES = frozenset({1004, 2049})
_RESETS_AT = re.compile(r"resets at (\S+?)[,)\s]", re.IGNORECASE)
_WINDOW_WORDS = (("5-hour", "5h"), ("weekly", "7d"), ("7-day", "7d"))


class MiniMaxAdapter(AnthropicMessagesAdapter):
    """Messages against a MiniMax Anthropic base URL (`https://api.minimax.io/anthropic`)."""

    def classify_failure(self, status: int, headers: Mapping[str, str], body: bytes) -> Failure:
        """429 with code 2056 is a spent window, its reset from the message; 1004 and 2049
        are authentication; the rest as Anthropic."""
        failure = super().classify_failure(status, headers, body)
        code = minimax_error_code(failure.message)
        if status == 429 and code == PLAN_LIMIT_CODE:
            return replace(failure, kind=FailureClass.QUOTA_EXHAUSTED)
        if code in _AUTH_CODES:
            return replace(failure, kind=FailureClass.AUTH)
        return failure

    def read_quota(
        self, connection: Connection, *, model: str, headers: Mapping[str, str], now: float
    ) -> tuple[QuotaWindow, ...]:
        """MiniMax answers carry no quota headers; the plan is read from `remains`."""
        return ()

    def read_overage(self, connection: Connection, headers: Mapping[str, str]) -> OverageReading:
        """The plan never bills past its windows."""
        return NO_OVERAGE

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
        """The window a 2056 answer names, with the reset its message gives."""
        failure = self.classify_failure(status, headers, body)
        if failure.kind is not FailureClass.QUOTA_EXHAUSTED:
            return ()
        message = failure.message
        lowered = message.lower()
        name = next((name for word, name in _WINDOW_WORDS if word in lowered), "5h")
        match = _RESETS_AT.search(message)
        reset = None if match is None else parse_reset(match[1], now=now)
        window = QuotaWindow(name, 100.0, reset, now, status=WindowStatus.REJECTED, source="error")
        return (window,)

    def usage_target(self, connection: Connection) -> PollTarget | None:
        """`GET /v1/token_plan/remains` on the API host, or under `usage_base_url` (the
        `www.` or China host); a `usage_base_url` that ends with either `remains` path is
        read as it is (`coding_plan/remains`, whose counts are what is left)."""
        if connection.secret is None and connection.source is None:
            return None
        url = (connection.usage_base_url or _host_root(connection.base_url)).rstrip("/")
        if not url.endswith((TOKEN_PLAN_PATH, CODING_PLAN_PATH)):
            url += TOKEN_PLAN_PATH
        counts_remaining = url.endswith(CODING_PLAN_PATH)
        headers = CredentialHeaders(connection, "Bearer", {"accept": "application/json"})
        return PollTarget(
            connection.id,
            url,
            headers,
            lambda body, now: read_minimax_remains(
                body, now=now, counts_remaining=counts_remaining
            ),
        )


def _host_root(base_url: str) -> str:
    # The Anthropic path lives under `/anthropic`; the quota endpoints at the host's root.
    parts = urlsplit(base_url)
    return f"{parts.scheme}://{parts.netloc}"
