"""The SSE splitter finds events however the bytes are cut."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from rungway.protocol.sse import SseSplitter, encode_event

STREAM = (
    b": keep-alive\n\n"
    b'event: message_start\ndata: {"type":"message_start"}\n\n'
    b"\n"
    b'data: {"a":1}\r\n\r\n'
    b"data: [DONE]\n\n"
)


def test_events_comments_and_crlf() -> None:
    events = SseSplitter().feed(STREAM)
    assert [(e.event, e.data) for e in events] == [
        ("message_start", b'{"type":"message_start"}'),
        (None, b'{"a":1}'),
        (None, b"[DONE]"),
    ]


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_split_of_the_bytes_gives_the_same_events(cuts: list[int]) -> None:
    splitter = SseSplitter()
    points = [0, *sorted(cuts), len(STREAM)]
    events = []
    for start, end in itertools.pairwise(points):
        events += splitter.feed(STREAM[start:end])
    assert [(e.event, e.data) for e in events] == [
        (e.event, e.data) for e in SseSplitter().feed(STREAM)
    ]
    assert splitter.pending == b""


def test_encode_event_round_trips() -> None:
    raw = encode_event({"type": "ping"}, event="ping")
    (event,) = SseSplitter().feed(raw)
    assert event.event == "ping"
    assert event.json() == {"type": "ping"}
    assert event.raw == raw
