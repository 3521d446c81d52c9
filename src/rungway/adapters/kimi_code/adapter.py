"""Kimi Code: the Anthropic Messages API at `https://api.kimi.com/coding`, and Chat
Completions at `https://api.kimi.com/coding/v1`, over one plan.

A Kimi Code console key (`x-api-key`) is how the plan's terms let a third-party tool in:
its OAuth login is for the official clients. The client's own identity headers (its user
agent, and the Kimi clients' `X-Msh-*` device headers) pass through unchanged, as the terms
forbid altering them. A spent plan answers 403 `access_terminated_error` ("You've reached
your weekly (7-day) usage limit ..."), the same status and type as its refusal of a client
it does not serve ("... only available for Coding Agents ..."): only the message tells
them apart. The windows and the booster
wallet, the extra usage billed past them, are read from `GET {base}/v1/usages`
(docs/provider-signals.md, Kimi Code).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from rungway.adapters.anthropic.messages import ANTHROPIC_SHAPE, AnthropicMessagesAdapter
from rungway.adapters.base import Connection, CredentialHeaders
from rungway.adapters.openai.chat import OPENAI_SHAPE, OpenAIChatAdapter
from rungway.protocol.failures import Failure, FailureClass
from rungway.quota import NO_OVERAGE, OverageReading
from rungway.quota.kimi import read_kimi_usage
from rungway.quota.poller import PollTarget
from rungway.routing.snapshot import QuotaWindow, WindowStatus

DEFAULT_BASE_URL = "https://api.kimi.com/coding"
CHAT_BASE_URL = f"{DEFAULT_BASE_URL}/v1"
_WRONG_CLIENT = "only available for coding agents"
_SPENT = ("usage limit", "quota")
_WINDOW_WORDS = (("7-day", "7d"), ("weekly", "7d"), ("5-hour", "5h"), ("billing cycle", "month"))
KIMI_SHAPE = replace(ANTHROPIC_SHAPE, forwarded=(*ANTHROPIC_SHAPE.forwarded, "x-msh-"))
"""A Messages request with the Kimi clients' own `X-Msh-*` device headers passed on too."""
KIMI_CHAT_SHAPE = replace(OPENAI_SHAPE, forwarded=(*OPENAI_SHAPE.forwarded, "x-msh-"))
"""A Chat Completions request with the Kimi clients' `X-Msh-*` device headers passed on."""


class KimiCodeAdapter(AnthropicMessagesAdapter):
    """Messages against a Kimi Code base URL (`https://api.kimi.com/coding`)."""

    shape = KIMI_SHAPE

    def classify_failure(self, status: int, headers: Mapping[str, str], body: bytes) -> Failure:
        """A 403 is a spent plan or a refused client, by its message; the rest as Anthropic."""
        return kimi_failure(super().classify_failure(status, headers, body))

    def read_quota(
        self, connection: Connection, *, model: str, headers: Mapping[str, str], now: float
    ) -> tuple[QuotaWindow, ...]:
        """Kimi answers carry no quota headers; the plan is read from its usage endpoint."""
        return ()

    def read_overage(self, connection: Connection, headers: Mapping[str, str]) -> OverageReading:
        """Nothing on a response says it was billed; the usage endpoint's wallet does."""
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
        """The window a spent-plan 403 names; see `spent_windows`."""
        return spent_windows(self.classify_failure(status, headers, body), now)

    def usage_target(self, connection: Connection) -> PollTarget | None:
        """`GET {base}/v1/usages` (or under `usage_base_url`), with the plan's key."""
        return usages_target(connection, connection.usage_base_url or connection.base_url)


class KimiCodeChatAdapter(OpenAIChatAdapter):
    """Chat Completions against a Kimi Code base URL with its version path
    (`https://api.kimi.com/coding/v1`)."""

    shape = KIMI_CHAT_SHAPE

    def classify_failure(self, status: int, headers: Mapping[str, str], body: bytes) -> Failure:
        """A 403 is a spent plan or a refused client, by its message; the rest as OpenAI."""
        return kimi_failure(super().classify_failure(status, headers, body))

    def read_quota(
        self, connection: Connection, *, model: str, headers: Mapping[str, str], now: float
    ) -> tuple[QuotaWindow, ...]:
        """Kimi answers carry no quota headers; the plan is read from its usage endpoint."""
        return ()

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
        """The window a spent-plan 403 names; see `spent_windows`."""
        return spent_windows(self.classify_failure(status, headers, body), now)

    def usage_target(self, connection: Connection) -> PollTarget | None:
        """`GET {base}/usages`: the base URL already ends with `/v1`."""
        base = connection.usage_base_url or connection.base_url.removesuffix("/v1")
        return usages_target(connection, base)


def kimi_failure(failure: Failure) -> Failure:
    """A 403 `access_terminated_error` read by its message: a refused client is a terms
    refusal, a spent plan a spent quota; any other failure as its API family read it."""
    if failure.status != 403:
        return failure
    message = failure.message.lower()
    if _WRONG_CLIENT in message:
        return replace(failure, kind=FailureClass.TERMS)
    if any(word in message for word in _SPENT):
        return replace(failure, kind=FailureClass.QUOTA_EXHAUSTED)
    return failure


def spent_windows(failure: Failure, now: float) -> tuple[QuotaWindow, ...]:
    """The window a spent-plan 403 names (weekly, 5-hour or the billing cycle), its reset
    left to the usage endpoint: the message gives none."""
    if failure.kind is not FailureClass.QUOTA_EXHAUSTED:
        return ()
    message = failure.message.lower()
    name = next((name for word, name in _WINDOW_WORDS if word in message), "7d")
    return (QuotaWindow(name, 100.0, None, now, status=WindowStatus.REJECTED, source="error"),)


def usages_target(connection: Connection, base: str) -> PollTarget | None:
    """`GET {base}/v1/usages` with the plan's key (None without one)."""
    if connection.secret is None and connection.source is None:
        return None
    headers = CredentialHeaders(connection, "Bearer", {"accept": "application/json"})
    return PollTarget(
        connection.id,
        f"{base}/v1/usages",
        headers,
        lambda body, now: read_kimi_usage(body, now=now),
    )
