"""The closed set of upstream failure classes, and what dispatch does with each."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class FailureClass(StrEnum):
    """Why an upstream attempt failed, decided once by the adapter that made it."""

    RATE_LIMITED = "rate_limited"
    QUOTA_EXHAUSTED = "quota_exhausted"
    BILLING = "billing"
    AUTH = "auth"
    MODEL_UNAVAILABLE = "model_unavailable"
    OVERLOADED = "overloaded"
    SERVER = "server"
    TIMEOUT = "timeout"
    NETWORK = "network"
    CONTEXT_TOO_LONG = "context_too_long"
    BAD_REQUEST = "bad_request"
    TERMS = "terms"
    """The plan refuses this client (a Claude plan serves Claude Code only): no cooldown and
    no breaker, since it serves the clients its terms allow; the request goes on as if the
    connection had been skipped."""


class UnreadableUpstream(ValueError):
    """An upstream's reply or stream event that the gateway cannot read: the upstream sent
    something its API does not allow, whatever the reading tripped on."""

    @classmethod
    def of(cls, error: Exception) -> UnreadableUpstream:
        """What the reading tripped on, in words: its own message when it raised one."""
        if isinstance(error, ValueError) and str(error):
            return cls(str(error))
        return cls(f"unexpected shape ({type(error).__name__}: {error})")


MALFORMED = (ValueError, TypeError, AttributeError, KeyError, IndexError)
"""What reading an upstream's JSON raises when its shape is not what its API allows:
readers take the upstream's JSON as it came, and an upstream is hostile until checked."""


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed attempt: its class, the upstream's status and message, and any wait hint.

    `body` keeps the upstream's own error body so a `bad_request` can be returned to the
    client exactly as the upstream sent it.
    """

    kind: FailureClass
    message: str
    status: int | None = None
    retry_after_s: float | None = None
    body: bytes | None = None

    @property
    def returns_to_client(self) -> bool:
        """The client's own fault: retrying on another connection would fail the same way."""
        return self.kind is FailureClass.BAD_REQUEST
