"""A trace: the requests a replay puts somewhere, in the order they arrived.

Token counts follow `protocol/usage.py` ReportedUsage: `input_tokens` excludes cache reads
and writes, and `reasoning_tokens` are already inside `output_tokens`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from rungway.protocol.api import Api
from rungway.protocol.usage import MAX_TOKEN_COUNT

__all__ = [
    "COUNT_RULE",
    "LAST_AT",
    "Trace",
    "TraceError",
    "TraceRequest",
    "check_trace",
    "is_count",
]

_APIS = frozenset(api.value for api in Api)
_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
LAST_AT: Final = datetime(9999, 1, 1, tzinfo=UTC).timestamp()
"""The latest `at` a trace may hold: the first second of the year 9999. The replay's
calendar (the next midnight, week or month after a request, in any time zone) then stays
within the years a datetime can hold."""


class TraceError(ValueError):
    """A trace that cannot be replayed, with what is wrong in plain words."""


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace: when, what model it asked for, over which API, its tokens."""

    at: float
    """When it arrived, in epoch seconds."""
    model: str
    """The name the client asked for: an `auto` id such as `auto/thrifty` or a model."""
    api: str
    """The ingress API, an `Api` value."""
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    stream: bool = False
    client_key: str | None = None
    """The client key's id, for its budget; None when the request had none."""
    session: str | None = None
    """The conversation it belongs to (what session affinity and the prompt cache follow);
    None when the trace does not say."""

    def __post_init__(self) -> None:
        if not 0 <= self.at <= LAST_AT:  # NaN fails this too
            raise TraceError(f"at must be epoch seconds from 0 to {LAST_AT:.0f}, not {self.at!r}")
        if not self.model:
            raise TraceError("model must not be empty")
        if self.api not in _APIS:
            raise TraceError(f"api must be one of {sorted(_APIS)}, not {self.api!r}")
        for name in _COUNTS:
            if not is_count(value := getattr(self, name)):
                raise TraceError(f"{name} must be {COUNT_RULE}, not {value!r}")
        if self.session is not None and not (isinstance(self.session, str) and self.session):
            raise TraceError(f"session must be a non-empty string or None, not {self.session!r}")
        reasoning = self.reasoning_tokens
        if reasoning > self.output_tokens:
            raise TraceError(
                f"reasoning_tokens ({reasoning}) are part of output_tokens ({self.output_tokens})"
            )

    @property
    def tokens(self) -> int:
        """Every token the request moved: input, cache reads and writes, and output."""
        return (
            self.input_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
            + self.output_tokens
        )


def is_count(value: object) -> bool:
    """Whether `value` is a token count: a whole number from 0 to MAX_TOKEN_COUNT, the most
    the gateway records for one request."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKEN_COUNT


COUNT_RULE: Final = f"a whole number from 0 to {MAX_TOKEN_COUNT}"


Trace = tuple[TraceRequest, ...]
"""Requests sorted by `at`."""


def check_trace(trace: Trace) -> Trace:
    """`trace` itself when its requests are in time order; a TraceError naming the first not."""
    for index in range(1, len(trace)):
        if trace[index].at < trace[index - 1].at:
            raise TraceError(
                f"request {index} at {trace[index].at} comes before request {index - 1}"
                f" at {trace[index - 1].at}: a trace is sorted by time"
            )
    return trace
