"""What the server hands the engine, and what the engine hands back."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from rungway.protocol.api import Api


@dataclass(frozen=True, slots=True)
class Call:
    """One client request, already checked for shape."""

    request_id: str
    api: Api
    body: dict[str, Any]
    raw_body: bytes
    stream: bool
    headers: Mapping[str, str]
    query: str
    client_key: str | None
    started_at: float
    """Epoch seconds, for the ledger."""
    started: float
    """`time.perf_counter()` when the request arrived, for latencies."""


@dataclass(frozen=True, slots=True)
class Reply:
    """A complete upstream response to pass to the client as it is."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


@dataclass(frozen=True, slots=True)
class Refusal:
    """The gateway's own error answer; the server renders it in the ingress API's shape."""

    status: int
    message: str
    code: str | None = None
    retry_after_s: float | None = None
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class StreamReply:
    """A stream that has started with content: headers now, then the body piece by piece."""

    headers: list[tuple[str, str]]
    body: AsyncIterator[bytes]
    status: int = 200


Outcome = Reply | Refusal | StreamReply
