"""One request's translation, for the routes whose upstream speaks another API.

The client's body is read into the canonical form once, on the first route that needs it;
each translated route then writes its own upstream body, and its reply or stream is read
back and written in the client's API. A route whose upstream speaks the client's API never
touches any of this.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable
from typing import Any

import orjson

from rungway.protocol.api import Api
from rungway.protocol.failures import MALFORMED, UnreadableUpstream
from rungway.protocol.sse import SseEvent
from rungway.translate.canonical import Started
from rungway.translate.codec import Codec, StreamReader, StreamWriter

CodecFor = Callable[[Api], Codec]


class Translation:
    """The client's request in canonical form, and the codecs either side of it."""

    __slots__ = ("_client", "_codec_for", "request")

    def __init__(self, client_api: Api, body: dict[str, Any], codec_for: CodecFor) -> None:
        """Read the client's body; raise ValueError saying what cannot be translated."""
        self._client = codec_for(client_api)
        self._codec_for = codec_for
        self.request = self._client.read_request(body)

    def limited(self, max_tokens: int) -> Translation:
        """The same translation, asking for at most `max_tokens` output tokens."""
        other = copy.copy(self)
        other.request = dataclasses.replace(self.request, max_tokens=max_tokens)
        return other

    def upstream_body(self, api: Api, model: str) -> tuple[dict[str, Any], bytes]:
        """The body (and its bytes) to send an upstream that speaks `api`."""
        body = self._codec_for(api).write_request(self.request, model=model)
        return body, orjson.dumps(body)

    def reply(self, api: Api, upstream: dict[str, Any]) -> bytes:
        """An upstream's complete reply, in the client's API; raise UnreadableUpstream when
        it is not a reply of its API."""
        try:
            read = self._codec_for(api).read_reply(upstream, self.request)
        except MALFORMED as error:
            raise UnreadableUpstream.of(error) from error
        if not read.created:
            # Some APIs say when a reply was made and others do not: the gateway's clock
            # stands in, as codecs read none.
            read = dataclasses.replace(read, created=int(time.time()))
        return orjson.dumps(self._client.write_reply(read, self.request))

    def stream(self, api: Api) -> StreamTranslator:
        """A translator for one upstream stream in `api`."""
        return StreamTranslator(
            self._codec_for(api).stream_reader(self.request),
            self._client.stream_writer(self.request),
        )


class StreamTranslator:
    """Upstream SSE events in, the client's SSE frames out."""

    __slots__ = ("_reader", "_writer")

    def __init__(self, reader: StreamReader, writer: StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    def __call__(self, event: SseEvent) -> bytes:
        """The client bytes one upstream event becomes (often b"" while a writer holds);
        raise UnreadableUpstream when the event is not one of its API."""
        try:
            events = self._reader.read(event)
        except MALFORMED as error:
            raise UnreadableUpstream.of(error) from error
        out = []
        for read in events:
            stamped = (
                dataclasses.replace(read, created=int(time.time()))
                if isinstance(read, Started) and not read.created
                else read
            )
            out.append(self._writer.write(stamped))
        return b"".join(out)
