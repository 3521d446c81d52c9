"""A relayed stream is recorded exactly once, even when the client leaves before its first
byte: the hold it carries is then settled, not left to expire."""

from __future__ import annotations

import asyncio

import orjson

from rungway.adapters.base import UpstreamRequest
from rungway.adapters.openai.chat import OpenAIChatWatcher
from rungway.config import TimeoutSettings
from rungway.engine.relay import StreamRelay
from rungway.protocol import openai_chat
from rungway.protocol.failures import Failure
from rungway.protocol.usage import ReportedUsage
from rungway.sim import Scenario, SimUpstream
from rungway.transport.http11 import Http11Transport


def _sim() -> SimUpstream:
    return SimUpstream(
        Scenario.model_validate(
            {
                "name": "metered",
                "api": "openai",
                "models": [{"id": "m"}],
                "response": {"output_tokens": 40, "chunk_tokens": 4, "chunk_interval_ms": 20},
            }
        )
    )


async def _relay(url: str, client: Http11Transport) -> StreamRelay:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    request = UpstreamRequest(
        f"{url}/v1/chat/completions", {"content-type": "application/json"}, orjson.dumps(body)
    )
    response = await client.send(request)
    relay = StreamRelay(response, OpenAIChatWatcher(False), openai_chat.stream_error_event)
    assert await relay.prime() is None
    return relay


class _Ends:
    """Notes each way a stream was reported to end."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Failure | None]] = []

    def stream_ended(
        self,
        outcome: str,
        failure: Failure | None,
        usage: ReportedUsage,
        ttfb: float | None,
        *,
        finished: bool,
    ) -> None:
        self.seen.append((outcome, failure))


def test_closing_a_stream_before_its_first_byte_still_finishes_it_once() -> None:
    ended = _Ends()

    async def run(url: str) -> None:
        client = Http11Transport(TimeoutSettings())
        await client.start()
        try:
            body = (await _relay(url, client)).body(ended)
            # The server closes a stream it never started when the client has gone.
            await body.aclose()
            await body.aclose()
        finally:
            await client.close()

    with _sim() as sim:
        asyncio.run(run(sim.url))
    assert ended.seen == [("client_closed", None)]


def test_closing_a_stream_midway_finishes_it_once() -> None:
    ended = _Ends()

    async def run(url: str) -> None:
        client = Http11Transport(TimeoutSettings())
        await client.start()
        try:
            body = (await _relay(url, client)).body(ended)
            assert await anext(body)
            await body.aclose()
        finally:
            await client.close()

    with _sim() as sim:
        asyncio.run(run(sim.url))
    assert ended.seen == [("client_closed", None)]
