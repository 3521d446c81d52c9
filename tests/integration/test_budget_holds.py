"""Budget holds through the real gateway: priced from what goes upstream, never leaked.

- A hold is the ceiling of the body actually sent: after translation, after thinking raises
  the output limit, and for a second try within a model's output limit.
- Racing translated thinking requests never overshoot a rung's budget by more than one
  request's ceiling.
- An attempt that raises, before or after its request goes upstream, or a stream whose
  relay breaks, leaves no hold behind, in memory or in the journal, and the client gets a
  5xx in its own API's error shape.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from rungway.app import build_gateway
from rungway.budget import cost_ceiling
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.engine.translation import StreamTranslator
from rungway.ledger.journal import journal_path
from rungway.ledger.sqlite import SqliteLedger, read_rows
from rungway.pricing import TokenCounts, rates_for
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.sim import Scenario, SimUpstream
from rungway.translate.anthropic import AnthropicCodec
from rungway.transport.http11 import Http11Transport

HAIKU = "claude-haiku-4-5"  # $1 in, $5 out per million tokens: the cheap rung
MINI = "gpt-4.1-mini"
HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]


def _sim(name: str, api: str, model: str, **response: Any) -> SimUpstream:
    auth = {"kind": "x-api-key" if api == "anthropic" else "bearer", "token": f"sk-{name}"}
    return SimUpstream(
        Scenario.model_validate(
            {
                "name": name,
                "api": api,
                "auth": auth,
                "models": [{"id": model, "max_output_tokens": response.pop("limit", 64000)}],
                "response": response,
            }
        )
    )


class Served:
    """A gateway with one budgeted cheap rung in front of one simulated upstream."""

    def __init__(self, url: str, ledger: SqliteLedger, sim: SimUpstream) -> None:
        self.url = url
        self.ledger = ledger
        self.sim = sim

    def cheap(self) -> dict[str, Any]:
        """The cheap rung's budget entry in `/admin/spend`."""
        body = httpx.get(f"{self.url}/admin/spend", timeout=5).json()
        [entry] = [each for each in body["budgets"]["rungs"] if each["rung"] == "cheap"]
        return dict(entry)

    def rows(self) -> list[dict[str, Any]]:
        self.ledger.flush()
        return read_rows(self.ledger.path, limit=1000)

    def open_reservations(self) -> int:
        db = sqlite3.connect(journal_path(self.ledger.path))
        try:
            return int(db.execute("SELECT COUNT(*) FROM reservations").fetchone()[0])
        finally:
            db.close()


@contextmanager
def _serve(tmp_path: Path, sim: SimUpstream, provider: str, budget: float) -> Iterator[Served]:
    with sim:
        model = sim.scenario.models[0].id
        (tmp_path / "key").write_text(f"sk-{sim.scenario.name}")
        base_url = sim.url if provider == "anthropic" else f"{sim.url}/v1"
        settings = parse_settings(
            {
                "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
                "quota": {"poll_interval_s": 0},
                "ladder": {"rung_budget_usd": {"cheap": budget}},
                "connections": [
                    {
                        "id": sim.scenario.name,
                        "provider": provider,
                        "auth": "apikey",
                        "credential": {"file": str(tmp_path / "key")},
                        "base_url": base_url,
                        "models": [model],
                    }
                ],
            }
        )
        gateway = build_gateway(settings, read_secrets(settings))
        assert isinstance(gateway.ledger, SqliteLedger)
        with BackgroundServer(uvicorn_config(gateway.app), "gateway") as server:
            yield Served(server.url, gateway.ledger, sim)


def _sent_ceiling(provider: str, sim: SimUpstream, index: int) -> float:
    sent = sim.requests[index]
    return cost_ceiling(provider, sent.body["model"], sent.body, len(sent.raw_body))


def _held_while_in_flight(served: Served, requests: int) -> float:
    """The rung's held amount once the upstream has received `requests` requests."""
    deadline = time.monotonic() + 5
    while len(served.sim.requests) < requests:
        assert time.monotonic() < deadline, "the request never reached the upstream"
        time.sleep(0.005)
    return float(served.cheap()["reserved_usd"])


def _chat(url: str, **body: Any) -> httpx.Response:
    body = {"model": "auto/thrifty", "messages": HELLO, **body}
    return httpx.post(f"{url}/v1/chat/completions", json=body, timeout=20)


def test_a_translated_thinking_request_holds_the_ceiling_of_the_body_it_sends(
    tmp_path: Path,
) -> None:
    sim = _sim("haiku", "anthropic", HAIKU, output_tokens=40, first_byte_ms=600)
    with _serve(tmp_path, sim, "anthropic", 1.0) as served, ThreadPoolExecutor(1) as pool:
        answer = pool.submit(_chat, served.url, reasoning_effort="high", max_tokens=16)
        held = _held_while_in_flight(served, 1)
        assert answer.result().status_code == 200
        sent = served.sim.requests[0].body
        # The thinking budget for "high" plus room for the answer, not the client's 16.
        assert sent["max_tokens"] == 25_600
        assert held == pytest.approx(_sent_ceiling("anthropic", served.sim, 0), rel=1e-9)
        assert served.cheap()["reserved_usd"] == 0.0


def test_racing_translated_thinking_requests_overshoot_by_at_most_one_ceiling(
    tmp_path: Path,
) -> None:
    budget = 0.30
    # Each request is sent with max_tokens 25,600 and writes 8,000 tokens ($0.04) of them.
    sim = _sim(
        "haiku", "anthropic", HAIKU, output_tokens=8000, chunk_tokens=1000, first_byte_ms=150
    )
    with _serve(tmp_path, sim, "anthropic", budget) as served:
        samples: list[float] = []
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                entry = served.cheap()
                samples.append(entry["spent_usd"] + entry["reserved_usd"])

        watcher = threading.Thread(target=watch)
        watcher.start()
        with ThreadPoolExecutor(16) as pool:
            answers = list(
                pool.map(
                    lambda _: _chat(served.url, reasoning_effort="high", max_tokens=16), range(16)
                )
            )
        stop.set()
        watcher.join()
        ceiling = _sent_ceiling("anthropic", served.sim, 0)
        served_here = [answer for answer in answers if answer.status_code == 200]
        refused = [answer for answer in answers if answer.status_code == 429]
        assert len(served_here) + len(refused) == 16
        assert served_here, "the budget fits at least one request"
        assert all(answer.json()["error"]["code"] == "budget_exhausted" for answer in refused)
        spent = sum(row["cost_usd"] for row in served.rows() if row["rung"] == "cheap")
        rates = rates_for("anthropic", HAIKU)
        assert rates is not None
        tally = served.sim.tally.total()
        assert spent == pytest.approx(
            rates.cost(TokenCounts(tally.input_tokens, tally.output_tokens)), abs=1e-9
        )
        assert spent <= budget + ceiling
        assert max(samples) <= budget + ceiling
        assert served.cheap()["reserved_usd"] == 0.0


def test_a_second_try_within_the_output_limit_holds_the_ceiling_of_its_own_body(
    tmp_path: Path,
) -> None:
    sim = _sim("mini", "openai", MINI, limit=8192, output_tokens=40, first_byte_ms=600)
    with _serve(tmp_path, sim, "openai", 1.0) as served, ThreadPoolExecutor(1) as pool:
        answer = pool.submit(_chat, served.url, max_tokens=32_000)
        held = _held_while_in_flight(served, 2)
        assert answer.result().status_code == 200
        assert [each.body["max_tokens"] for each in served.sim.requests] == [32_000, 8192]
        assert held == pytest.approx(_sent_ceiling("openai", served.sim, 1), rel=1e-9)
        assert served.cheap()["reserved_usd"] == 0.0


def _no_hold_left(served: Served) -> None:
    assert served.cheap()["reserved_usd"] == 0.0
    assert served.open_reservations() == 0


def test_an_attempt_that_raises_before_sending_releases_its_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> dict[str, Any]:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(AnthropicCodec, "write_request", broken)
    sim = _sim("haiku", "anthropic", HAIKU, output_tokens=40)
    with _serve(tmp_path, sim, "anthropic", 1.0) as served:
        for _ in range(3):
            answer = _chat(served.url, max_tokens=64)
            assert answer.status_code == 500
            error = answer.json()["error"]  # the client's own API's shape, not plain text
            assert error["code"] == "gateway_error"
            assert "RecursionError" in error["message"]
            _no_hold_left(served)
        assert served.sim.requests == []
        assert served.cheap()["spent_usd"] == 0.0


def test_an_attempt_that_raises_after_sending_settles_its_hold_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_send = Http11Transport.send

    async def send_then_break(self: Http11Transport, request: Any) -> Any:
        response = await real_send(self, request)
        response.close()
        raise RuntimeError("a fault in the gateway")

    monkeypatch.setattr(Http11Transport, "send", send_then_break)
    sim = _sim("mini", "openai", MINI, output_tokens=40)
    with _serve(tmp_path, sim, "openai", 1.0) as served:
        answer = _chat(served.url, max_tokens=64)
        assert answer.status_code == 500
        assert answer.json()["error"]["code"] == "gateway_error"
        _no_hold_left(served)
        [row] = served.rows()
        # The upstream may have billed it: counted at its ceiling, not forgotten.
        assert row["outcome"] == "gateway_error"
        assert row["cost_usd"] == pytest.approx(_sent_ceiling("openai", served.sim, 0))
        assert served.cheap()["spent_usd"] == pytest.approx(row["cost_usd"])


def test_a_stream_whose_relay_breaks_ends_with_an_error_event_and_leaves_no_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_call = StreamTranslator.__call__
    seen = [0]

    def breaks_later(self: StreamTranslator, event: Any) -> bytes:
        seen[0] += 1
        if seen[0] == 10:
            raise ValueError("an event the writer cannot write")
        return real_call(self, event)

    monkeypatch.setattr(StreamTranslator, "__call__", breaks_later)
    sim = _sim("haiku", "anthropic", HAIKU, output_tokens=80, chunk_tokens=4, chunk_interval_ms=10)
    with _serve(tmp_path, sim, "anthropic", 1.0) as served:
        body = {"model": "auto/thrifty", "messages": HELLO, "max_tokens": 100, "stream": True}
        received = b""
        with httpx.stream(
            "POST", f"{served.url}/v1/chat/completions", json=body, timeout=10
        ) as response:
            assert response.status_code == 200
            try:
                for chunk in response.iter_raw():
                    received += chunk
            except httpx.HTTPError as error:
                pytest.fail(f"the stream broke off instead of ending with an error: {error}")
        assert b'"code":"server"' in received
        assert received.rstrip().endswith(b"data: [DONE]")
        _no_hold_left(served)
        [row] = served.rows()
        assert row["outcome"] == "gateway_error"
