"""Pooled upstream connections stay usable after a large stream and an idle gap."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from rungway.clock import FakeClock
from rungway.sim import Scenario, SimUpstream
from tests.integration.conftest import DEEPSEEK, START, StartGateway

IDLE_S = 0.5


def _big_stream_sim() -> SimUpstream:
    scenario = Scenario.model_validate(
        {
            "name": "big",
            "api": "openai",
            "quota_headers": "none",
            "auth": {"kind": "none"},
            "models": [{"id": DEEPSEEK, "context_window": 200000}],
            # About 10 MB of text in 14 KB events: the gateway's read buffer fills and the
            # socket is paused and resumed many times, the last time after the body's end.
            "response": {"output_tokens": 1_800_000, "chunk_tokens": 2000},
        }
    )
    return SimUpstream(scenario, FakeClock(START))


def _post(url: str, *, stream: bool) -> tuple[int, float, bytes]:
    body: dict[str, Any] = {
        "model": DEEPSEEK,
        "messages": [{"role": "user", "content": "hi"}],
        "stream": stream,
        "max_tokens": 2_000_000 if stream else 8,
    }
    started = time.perf_counter()
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=60) as answer:
        data = answer.read()
    return answer.status_code, time.perf_counter() - started, data


def test_pooled_connections_survive_large_streams_and_an_idle_gap(
    start_gateway: StartGateway,
) -> None:
    with _big_stream_sim() as sim:
        gateway = start_gateway(
            timeouts={"connect_s": 2, "first_byte_s": 30, "idle_s": IDLE_S},
            connections=[
                {
                    "id": "big",
                    "provider": "ollama",
                    "auth": "none",
                    "base_url": sim.url + "/v1",
                    "models": [DEEPSEEK],
                }
            ],
        )
        # Several large streams at once leave several pooled connections behind.
        with ThreadPoolExecutor(4) as pool:
            big = list(pool.map(lambda _: _post(gateway.url, stream=True), range(4)))
        assert [(status, len(data) // 1_000_000) for status, _, data in big] == [(200, 10)] * 4
        time.sleep(IDLE_S * 3)
        with ThreadPoolExecutor(12) as pool:
            after = list(pool.map(lambda _: _post(gateway.url, stream=False), range(12)))
    failed = [
        (status, round(took * 1000), data[:200]) for status, took, data in after if status != 200
    ]
    assert failed == []
