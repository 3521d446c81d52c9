"""Server-sent events: encoding frames and splitting a byte stream into events.

The splitter works on raw bytes and hands back each event's exact bytes, so a proxy can
forward an event unchanged after looking at it. It tolerates `\\r\\n` line endings,
comment lines (`: keep-alive`) and blank keep-alive lines.
"""

from __future__ import annotations

from typing import NamedTuple

import orjson


def encode_event(data: object, event: str | None = None) -> bytes:
    """Frame one event: an optional `event:` line, one `data:` line of JSON, a blank line."""
    payload = orjson.dumps(data)
    if event is None:
        return b"data: " + payload + b"\n\n"
    return b"event: " + event.encode() + b"\ndata: " + payload + b"\n\n"


DONE = b"data: [DONE]\n\n"


class SseEvent(NamedTuple):
    """One event as received: its name (if any), its joined data, and its raw bytes.

    A named tuple rather than a dataclass: a stream makes one per event, and a tuple is
    built in C.
    """

    event: str | None
    data: bytes
    raw: bytes

    def json(self) -> object:
        """Parse the data as JSON."""
        return orjson.loads(self.data)


class SseSplitter:
    """Incremental SSE parser: feed it chunks, get back the complete events so far."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """Add `chunk` and return every event it completes, in order."""
        buffer = self._buffer + chunk if self._buffer else chunk
        if b"\r" in buffer:
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        events: list[SseEvent] = []
        start = 0
        while True:
            end = buffer.find(b"\n\n", start)
            if end < 0:
                break
            block = buffer[start : end + 2]
            start = end + 2
            event = _parse_block(block)
            if event is not None:
                events.append(event)
        self._buffer = buffer[start:]
        return events

    @property
    def pending(self) -> bytes:
        """Bytes received that do not yet form a complete event."""
        return self._buffer


def _parse_block(block: bytes) -> SseEvent | None:
    # Fast paths for the two shapes real upstreams send: `data: X` alone (OpenAI) and
    # `event: N` then `data: X` (Anthropic, Responses), each line once, no comments.
    if block.startswith(b"data: ") and block.count(b"\n") == 2:
        return SseEvent(None, block[6:-2], block)
    if block.startswith(b"event: ") and block.count(b"\n") == 3:
        end = block.index(b"\n")
        if block.startswith(b"data: ", end + 1):
            return SseEvent(block[7:end].decode("utf-8", "replace"), block[end + 7 : -2], block)
    name: str | None = None
    data_lines: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line.startswith(b":"):
            continue
        field, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            data_lines.append(value)
        elif field == b"event":
            name = value.decode("utf-8", "replace")
    if name is None and not data_lines:
        return None
    return SseEvent(event=name, data=b"\n".join(data_lines), raw=block)
