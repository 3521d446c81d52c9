"""What each wire API provides to translation: readers and writers of the canonical form.

A route whose client API differs from its upstream's runs:

    request:  client codec.read_request  -> upstream codec.write_request
    reply:    upstream codec.read_reply  -> client codec.write_reply
    stream:   upstream codec.stream_reader -> client codec.stream_writer

Everything here is pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import Any, Protocol

from rungway.protocol.api import Api
from rungway.protocol.sse import SseEvent
from rungway.translate.canonical import Event, Reply, Request


class StreamReader(Protocol):
    """Turns one upstream stream's SSE events, in order, into canonical events."""

    def read(self, event: SseEvent) -> list[Event]:
        """The canonical events one upstream event carries (often one, sometimes none)."""
        ...


class StreamWriter(Protocol):
    """Turns canonical events, in order, into the client's SSE frames."""

    def write(self, event: Event) -> bytes:
        """The client bytes for `event`: complete SSE frames, or b"" while holding back."""
        ...


class Codec(Protocol):
    """One wire API's side of translation."""

    api: Api

    def read_request(self, body: dict[str, Any]) -> Request:
        """A client's request body (already checked for shape) as a canonical request."""
        ...

    def write_request(self, request: Request, *, model: str) -> dict[str, Any]:
        """The upstream request body for `request`, asking for `model`."""
        ...

    def read_reply(self, body: dict[str, Any], request: Request) -> Reply:
        """An upstream's complete reply; `request` restores names the writer shortened."""
        ...

    def write_reply(self, reply: Reply, request: Request) -> dict[str, Any]:
        """The client's reply body for `reply` to `request`."""
        ...

    def stream_reader(self, request: Request) -> StreamReader:
        """A reader for one upstream stream answering `request`."""
        ...

    def stream_writer(self, request: Request) -> StreamWriter:
        """A writer for one client stream answering `request`."""
        ...
