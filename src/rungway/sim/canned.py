"""A canned upstream: one answer a scenario's simulated upstream really gave, replayed to
every request at almost no cost.

Throughput benchmarks run the gateway, its upstream and the load generator on the same
cores. A full simulated upstream (quota windows, faults, a control API, an ASGI stack)
costs a good share of what the gateway does per request, so it takes cores the gateway
would use and hides how the gateway itself scales. The canned upstream records one
non-streaming answer from the real simulated upstream (status, headers with their quota
readings, body with its usage), then serves those bytes to each request with a bare HTTP
parser: no quota moves, no faults, the same tokens each time.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Callable
from typing import Any, cast

import httptools

from rungway.sim.scenario import Scenario
from rungway.sim.server import SimUpstream

_MESSAGES_UNDER = {"anthropic": "", "kimi-code": "/coding", "minimax": "/anthropic"}
_SKIPPED = {"content-length", "connection", "date", "server", "transfer-encoding"}


def record_answer(scenario: Scenario) -> bytes:
    """One complete HTTP/1.1 response the scenario's upstream gives to a small request."""
    model = scenario.models[0].id
    prompt = "Say hello in five words, please."
    gemini: dict[str, Any] = {
        "contents": [{"role": "user", "parts": [{"text": prompt}]}],
        "generationConfig": {"maxOutputTokens": 64},
    }
    body: dict[str, Any]
    if scenario.api in _MESSAGES_UNDER:
        # The coding plans serve the Messages API under a path of their own.
        path = f"{_MESSAGES_UNDER[scenario.api]}/v1/messages"
        body = {"model": model, "max_tokens": 64}
        headers = {"anthropic-version": "2023-06-01", "x-api-key": scenario.auth.token or ""}
    elif scenario.api == "gemini":
        path, body = f"/v1beta/models/{model}:generateContent", gemini
        headers = {"x-goog-api-key": scenario.auth.token or ""}
    elif scenario.api == "code-assist":
        project = scenario.code_assist_settings.project if scenario.code_assist_settings else ""
        path = "/v1internal:generateContent"
        body = {"model": model, "project": project, "request": gemini}
        headers = {"authorization": f"Bearer {scenario.auth.token or ''}"}
    else:
        path = "/api/coding/paas/v4" if scenario.api == "glm" else "/v1"
        path, body = f"{path}/chat/completions", {"model": model, "max_tokens": 64}
        headers = {"authorization": f"Bearer {scenario.auth.token or ''}"}
    if scenario.api in ("anthropic", "openai", "responses", "glm", "kimi-code", "minimax"):
        body["messages"] = [{"role": "user", "content": prompt}]
    with SimUpstream(scenario) as sim:
        request = urllib.request.Request(
            sim.url + path,
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json", **headers},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            status, reason = answer.status, answer.reason
            kept = [(k, v) for k, v in answer.headers.items() if k.lower() not in _SKIPPED]
            payload: bytes = answer.read()
    head = [f"HTTP/1.1 {status} {reason}", *(f"{k}: {v}" for k, v in kept)]
    head.append(f"content-length: {len(payload)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + payload


class _Replay(asyncio.Protocol):
    def __init__(self, answer: bytes) -> None:
        self._answer = answer
        self._transport: asyncio.WriteTransport | None = None
        self._parser = httptools.HttpRequestParser(self)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio's, though they behave as them.
        self._transport = cast("asyncio.WriteTransport", transport)

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            if self._transport is not None:
                self._transport.close()

    def on_message_complete(self) -> None:
        if self._transport is not None:
            self._transport.write(self._answer)


async def serve_canned(
    answer: bytes, host: str, port: int, on_ready: Callable[[str], Any] | None = None
) -> None:
    """Serve `answer` to every request on `host:port` until cancelled."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Replay(answer), host, port, backlog=2048)
    bound = server.sockets[0].getsockname()
    if on_ready is not None:
        on_ready(f"http://{bound[0]}:{bound[1]}")
    async with server:
        await server.serve_forever()
