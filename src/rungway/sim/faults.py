"""Faults a simulated upstream can be told to inject, and the FIFO queue that holds them.

A fault is consumed by the first generation request it matches (its `model`, and for
`stream_error` a streaming request); requests it does not match leave it queued. Each
fault fires `times` times before it leaves the queue.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class _FaultBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    times: int = Field(default=1, ge=1)
    model: str | None = None

    def matches(self, model: str, stream: bool) -> bool:
        """Whether a request for `model` (streaming or not) should consume this fault."""
        return self.model is None or self.model == model


class HttpErrorFault(_FaultBase):
    """Answer with an HTTP error in the provider's own error shape.

    Without `quota_headers` the response carries no rate-limit headers, which is how a
    real non-quota 429 looks on a Claude plan.
    """

    kind: Literal["http_error"] = "http_error"
    status: int = Field(ge=400, le=599)
    error_type: str | None = None
    message: str | None = None
    code: str | None = None
    retry_after_s: float | None = Field(default=None, ge=0)
    quota_headers: bool = False
    echo_credential: bool = False
    """Quote the credential the request presented, whole, at the end of the message: a
    misbehaving upstream's 401 (OpenAI's own echoes the key with its middle starred)."""


class QuotaExhaustedFault(_FaultBase):
    """Use up a window now (default: the first window that applies to the request's model).

    The window stays exhausted until its reset, exactly as if traffic had filled it.
    """

    kind: Literal["quota_exhausted"] = "quota_exhausted"
    window: str | None = None


class TimeoutFault(_FaultBase):
    """Wait `delay_s` seconds of real time before answering (then answer normally)."""

    kind: Literal["timeout"] = "timeout"
    delay_s: float = Field(ge=0)


class DisconnectFault(_FaultBase):
    """Drop the TCP connection: after `after_events` stream events, or before any response."""

    kind: Literal["disconnect"] = "disconnect"
    after_events: int = Field(default=0, ge=0)


class StreamErrorFault(_FaultBase):
    """Send `after_events` events of a 200 stream, then an in-stream error event."""

    kind: Literal["stream_error"] = "stream_error"
    after_events: int = Field(default=0, ge=0)
    error_type: str | None = None
    message: str | None = None
    echo_credential: bool = False
    """Quote the credential the request presented, whole, at the end of the message."""

    def matches(self, model: str, stream: bool) -> bool:
        """Only streaming requests can carry an in-stream error."""
        return stream and super().matches(model, stream)


class StallFault(_FaultBase):
    """Send `after_events` events of a 200 stream, then only the provider's keep-alives
    (Anthropic's `ping` event, an SSE comment for OpenAI) every `interval_s` for up to
    `duration_s`, then drop the connection: a stream that stays alive and says nothing."""

    kind: Literal["stall"] = "stall"
    after_events: int = Field(default=0, ge=0)
    interval_s: float = Field(default=1.0, gt=0)
    duration_s: float = Field(default=600.0, gt=0)

    def matches(self, model: str, stream: bool) -> bool:
        """Only a stream can stall while staying alive."""
        return stream and super().matches(model, stream)


class GarbageFault(_FaultBase):
    """Answer 200 with a body that is not JSON, labelled `application/json`."""

    kind: Literal["garbage"] = "garbage"
    body: str = "upstream connect error or disconnect/reset before headers. reset reason: overflow"


Fault = Annotated[
    HttpErrorFault
    | QuotaExhaustedFault
    | TimeoutFault
    | DisconnectFault
    | StreamErrorFault
    | StallFault
    | GarbageFault,
    Field(discriminator="kind"),
]

_ONE_OR_MANY: TypeAdapter[Fault | list[Fault]] = TypeAdapter(Fault | list[Fault])


def parse_faults(payload: Any) -> list[Fault]:
    """Validate one fault or a list of faults (as decoded JSON or YAML)."""
    parsed = _ONE_OR_MANY.validate_python(payload)
    return parsed if isinstance(parsed, list) else [parsed]


class QueuedFault(BaseModel):
    """A fault waiting in the queue and how many more times it will fire."""

    model_config = ConfigDict(frozen=True)

    fault: Fault
    remaining: int


@dataclass(slots=True)
class _Entry:
    fault: Fault
    remaining: int


class FaultQueue:
    """FIFO of pending faults; safe to push from a test thread while the server consumes."""

    __slots__ = ("_entries", "_lock")

    def __init__(self, faults: Iterable[Fault] = ()) -> None:
        self._lock = threading.Lock()
        self._entries = [_Entry(fault, fault.times) for fault in faults]

    def push(self, fault: Fault) -> None:
        """Append `fault` to the back of the queue."""
        with self._lock:
            self._entries.append(_Entry(fault, fault.times))

    def take(self, model: str, stream: bool) -> Fault | None:
        """Consume one firing of the first queued fault that matches this request."""
        if not self._entries:  # the common case: nothing queued, no lock taken
            return None
        with self._lock:
            for position, entry in enumerate(self._entries):
                if entry.fault.matches(model, stream):
                    entry.remaining -= 1
                    if entry.remaining == 0:
                        del self._entries[position]
                    return entry.fault
        return None

    def pending(self) -> list[QueuedFault]:
        """The queue's contents, front first."""
        with self._lock:
            return [QueuedFault(fault=e.fault, remaining=e.remaining) for e in self._entries]

    def clear(self) -> None:
        """Drop every queued fault."""
        with self._lock:
            self._entries.clear()
