"""A hostile upstream behind the real gateway, with a budget: what the client gets, what the
ledger records and what the budget is charged, answer by answer.

One gateway serves a budgeted cheap rung in front of one hostile upstream
(`tests.hostile`), whose answer each test picks. The money rule under test: an answer the
upstream served (a 2xx head) is billed, so its request is recorded with its cost, by its
usage when the answer was read whole and at its hold's ceiling when it was not; an answer
that never got as far as a valid head costs nothing. Either way no hold is left behind and
the budget's spend equals the ledger's.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from rungway.app import build_gateway
from rungway.budget import cost_ceiling
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.ledger.sqlite import SqliteLedger, read_rows
from rungway.pricing import TokenCounts, rates_for
from rungway.runner import BackgroundServer, uvicorn_config
from tests.hostile import CHUNKED_HEAD, LAST_CHUNK, HostileUpstream, Peer, Received, chunk, pieces

MODEL = "gpt-4.1-mini"
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
IDLE_S = 1.0
SSE_HEAD = CHUNKED_HEAD % b"text/event-stream"


def _reply(size: int = 0) -> bytes:
    """A chat completion whose content pads it to about `size` bytes."""
    message = {"role": "assistant", "content": "x" * size}
    return orjson.dumps(
        {
            "id": "chatcmpl-hostile",
            "object": "chat.completion",
            "model": MODEL,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": USAGE,
        }
    )


def _events(size: int = 0) -> list[bytes]:
    """A chat completion stream: content in pieces of up to 64 KiB, then its usage."""
    base = {"id": "chatcmpl-hostile", "object": "chat.completion.chunk", "model": MODEL}
    events = []
    for start in range(0, max(size, 1), 65536):
        text = "x" * min(65536, max(size, 1) - start)
        delta = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
        events.append(b"data: " + orjson.dumps({**base, **delta}) + b"\n\n")
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    events.append(b"data: " + orjson.dumps({**base, **end}) + b"\n\n")
    events.append(b"data: " + orjson.dumps({**base, "choices": [], "usage": USAGE}) + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    return events


def _length_framed(body: bytes) -> list[bytes]:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
    return [head % len(body), *pieces(body)]


@dataclass
class Upstream:
    """What the hostile upstream does with the next request: `script`, by default a good
    answer."""

    script: Callable[[Peer, Received], Any] | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def __call__(self, peer: Peer, request: Received) -> None:
        if self.script is None:
            wants_stream = orjson.loads(request.body).get("stream") is True
            sent = [SSE_HEAD, *map(chunk, _events()), LAST_CHUNK] if wants_stream else None
            await peer.send(sent or _length_framed(_reply()))
            return
        await self.script(peer, request)


@dataclass
class Served:
    """The gateway, its upstream and its ledger."""

    url: str
    ledger: SqliteLedger
    upstream: Upstream
    hostile: HostileUpstream

    def post(self, *, stream: bool = False, timeout: float = 30) -> httpx.Response:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
        body["max_tokens"] = 1000
        return httpx.post(f"{self.url}/v1/chat/completions", json=body, timeout=timeout)

    def row(self, request_id: str) -> dict[str, Any]:
        self.ledger.flush()
        (row,) = [r for r in read_rows(self.ledger.path, 1000) if r["request_id"] == request_id]
        return row

    def ceiling(self) -> float:
        """The hold of the last request the upstream received."""
        sent = self.hostile.requests[-1].body
        return cost_ceiling("openai", MODEL, orjson.loads(sent), len(sent))

    def books_agree(self) -> None:
        """No hold is left, and the budget has spent what the ledger records."""
        self.ledger.flush()
        spend = httpx.get(f"{self.url}/admin/spend", timeout=5).json()
        (cheap,) = [each for each in spend["budgets"]["rungs"] if each["rung"] == "cheap"]
        recorded = sum(r["cost_usd"] or 0.0 for r in read_rows(self.ledger.path, 1000))
        assert cheap["reserved_usd"] == 0.0
        assert math.isclose(cheap["spent_usd"], recorded, rel_tol=1e-9, abs_tol=1e-12)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp_path: Path = tmp_path_factory.mktemp("hostile")
    upstream = Upstream()
    with HostileUpstream(upstream) as hostile:
        (tmp_path / "key").write_text("sk-hostile")
        settings = parse_settings(
            {
                "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
                "quota": {"poll_interval_s": 0},
                "timeouts": {"idle_s": IDLE_S, "first_byte_s": 5},
                "ladder": {"rung_budget_usd": {"cheap": 100.0}},
                "connections": [
                    {
                        "id": "hostile",
                        "provider": "openai",
                        "auth": "apikey",
                        "credential": {"file": str(tmp_path / "key")},
                        "base_url": f"{hostile.url}/v1",
                        "models": [MODEL],
                    }
                ],
            }
        )
        gateway = build_gateway(settings, read_secrets(settings))
        assert isinstance(gateway.ledger, SqliteLedger)
        with BackgroundServer(uvicorn_config(gateway.app), "gateway") as server:
            yield Served(server.url, gateway.ledger, upstream, hostile)


@pytest.fixture
def upstream(served: Served) -> Iterator[Upstream]:
    yield served.upstream
    served.upstream.script = None


def _usage_cost() -> float:
    rates = rates_for("openai", MODEL)
    assert rates is not None
    return rates.cost(TokenCounts(USAGE["prompt_tokens"], USAGE["completion_tokens"], 0, 0))


def _sends(*data: bytes, then: str = "", idle: float = 0.0) -> Callable[[Peer, Received], Any]:
    async def script(peer: Peer, request: Received) -> None:
        for piece in data:
            await peer.send(pieces(piece))
        if idle:
            await asyncio.sleep(idle)
        if then == "close":
            peer.close()
        elif then == "reset":
            await asyncio.sleep(0.05)
            peer.reset()

    return script


def _then_served(served: Served) -> None:
    """The next request is answered and billed by its usage, on a sound connection (which
    also closes the connection's breaker, so that failures do not add up across tests)."""
    served.upstream.script = None
    before = len(served.hostile.requests)
    response = served.post()
    assert response.status_code == 200, response.text
    assert served.row(response.headers["x-rungway-request-id"])["cost_usd"] == _usage_cost()
    assert len(served.hostile.requests) == before + 1
    served.books_agree()


# Answers read whole: billed by their usage, at every size.


@pytest.mark.parametrize("size", [0, 1024, 600 * 1024, 5 * 1024 * 1024])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_an_answer_of_any_size_is_delivered_and_billed_by_its_usage(
    served: Served, upstream: Upstream, size: int, stream: bool
) -> None:
    answer = (
        [SSE_HEAD, *map(chunk, _events(size)), LAST_CHUNK]
        if stream
        else _length_framed(_reply(size))
    )
    upstream.script = _sends(*answer)
    response = served.post(stream=stream)
    assert response.status_code == 200, response.text[:300]
    assert len(response.content) > size
    row = served.row(response.headers["x-rungway-request-id"])
    assert (row["outcome"], row["cost_usd"]) == ("ok", _usage_cost())
    served.books_agree()


def test_a_50_mb_answer_is_delivered_and_billed_by_its_usage(
    served: Served, upstream: Upstream
) -> None:
    upstream.script = _sends(*_length_framed(_reply(50 * 1024 * 1024)))
    response = served.post()
    assert response.status_code == 200
    assert served.row(response.headers["x-rungway-request-id"])["cost_usd"] == _usage_cost()
    served.books_agree()


@pytest.mark.parametrize(
    "after", [b"HTTP/1.1 200 OK\r\n", b"XYZ"], ids=["part of a head", "garbage"]
)
def test_bytes_after_the_answer_leave_it_served_once_and_the_pool_sound(
    served: Served, upstream: Upstream, after: bytes
) -> None:
    upstream.script = _sends(b"".join(_length_framed(_reply())) + after)
    before = len(served.hostile.requests)
    response = served.post()
    assert response.status_code == 200
    assert served.row(response.headers["x-rungway-request-id"])["cost_usd"] == _usage_cost()
    for _ in range(3):
        _then_served(served)
    assert len(served.hostile.requests) == before + 4


def test_a_slow_drip_is_delivered_and_billed(served: Served, upstream: Upstream) -> None:
    answer = b"".join(_length_framed(_reply()))

    async def drip(peer: Peer, request: Received) -> None:
        for at in range(0, len(answer), 16):
            peer.write(answer[at : at + 16])
            await asyncio.sleep(0.001)

    upstream.script = drip
    response = served.post()
    assert response.status_code == 200
    assert served.row(response.headers["x-rungway-request-id"])["cost_usd"] == _usage_cost()
    served.books_agree()


# Answers served but never read whole: billed at the hold's ceiling, never tried again.

_UNREAD = {
    "cut short": (
        [b"HTTP/1.1 200 OK\r\ncontent-length: 5000\r\n\r\n" + _reply()],
        "close",
        502,
        "network",
    ),
    "reset mid-body": (
        [*_length_framed(_reply(300_000))[:1], b"{" * 1000],
        "reset",
        502,
        "network",
    ),
    "gone idle": ([b"HTTP/1.1 200 OK\r\ncontent-length: 5000\r\n\r\n{"], "", 504, "timeout"),
    "bad chunk": ([CHUNKED_HEAD % b"application/json" + b"zz\r\n"], "", 502, "network"),
}


@pytest.mark.parametrize("case", list(_UNREAD))
def test_an_answer_served_but_never_read_whole_is_billed_at_its_ceiling(
    served: Served, upstream: Upstream, case: str
) -> None:
    sent, then, status, outcome = _UNREAD[case]
    upstream.script = _sends(*sent, then=then, idle=IDLE_S + 1 if not then else 0.0)
    before = len(served.hostile.requests)
    response = served.post()
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == f"upstream_{outcome}"
    row = served.row(response.headers["x-rungway-request-id"])
    assert row["outcome"] == outcome
    assert row["cost_usd"] == pytest.approx(served.ceiling())
    # Served once: no other attempt billed it again.
    assert len(served.hostile.requests) == before + 1
    served.books_agree()
    _then_served(served)


def test_an_answer_over_the_body_limit_is_refused_at_the_limit_and_billed_at_its_ceiling(
    served: Served, upstream: Upstream
) -> None:
    async def endless(peer: Peer, request: Received) -> None:
        # Chunked, so no length warns of it, and never ended: only the limit stops it.
        megabyte = chunk(b" " * (1024 * 1024))
        await peer.send([CHUNKED_HEAD % b"application/json", *([megabyte] * 65)])
        await asyncio.sleep(IDLE_S * 3)

    upstream.script = endless
    response = served.post()
    # Refused at the limit: a read that waited for more would end at the idle timeout (504).
    assert response.status_code == 502
    assert "the upstream sent a body over its limit" in response.json()["error"]["message"]
    row = served.row(response.headers["x-rungway-request-id"])
    assert (row["outcome"], row["cost_usd"]) == ("network", pytest.approx(served.ceiling()))
    served.books_agree()
    _then_served(served)


def test_a_stream_cut_off_midway_is_billed_at_its_ceiling(
    served: Served, upstream: Upstream
) -> None:
    upstream.script = _sends(SSE_HEAD, chunk(_events(100)[0]), then="reset")
    response = served.post(stream=True)
    assert response.status_code == 200
    assert b"error" in response.content
    row = served.row(response.headers["x-rungway-request-id"])
    assert row["outcome"] == "network"
    assert row["cost_usd"] == pytest.approx(served.ceiling())
    served.books_agree()
    _then_served(served)


# Answers that never got as far as a valid head: not served, so not billed.

_NO_ANSWER = {
    "header flood": b"HTTP/1.1 200 OK\r\n" + (b"x-flood: " + b"y" * 1000 + b"\r\n") * 200,
    "too many headers": b"HTTP/1.1 200 OK\r\n" + b"x-h: 1\r\n" * 200 + b"\r\n",
    "switching protocols": b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\n",
    "interim flood": b"HTTP/1.1 100 Continue\r\n\r\n" * 40_000,
    "obsolete folding": b"HTTP/1.1 200 OK\r\nx-a: 1\r\n 2\r\ncontent-length: 2\r\n\r\n{}",
    "length and chunks": (
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n"
    ),
    "conflicting lengths": b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n",
    "invalid length": b"HTTP/1.1 200 OK\r\ncontent-length: 2x\r\n\r\n{}",
}


@pytest.mark.parametrize("case", list(_NO_ANSWER))
def test_an_answer_without_a_valid_head_costs_nothing_and_spoils_nothing(
    served: Served, upstream: Upstream, case: str
) -> None:
    upstream.script = _sends(_NO_ANSWER[case])
    response = served.post()
    assert response.status_code == 502, response.text
    assert response.json()["error"]["code"] == "upstream_network"
    row = served.row(response.headers["x-rungway-request-id"])
    assert (row["outcome"], row["cost_usd"]) == ("network", 0.0)
    served.books_agree()
    _then_served(served)


# Answers the client hung up on: the upstream billed them all the same.


def _row_when_recorded(served: Served, before: int) -> dict[str, Any]:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        served.ledger.flush()
        rows = read_rows(served.ledger.path, 1000)
        if len(rows) > before:
            return rows[0]
        time.sleep(0.05)
    raise AssertionError("the request was never recorded")


def test_a_stream_the_client_hangs_up_on_is_billed_at_its_ceiling(
    served: Served, upstream: Upstream
) -> None:
    events = _events(10)

    async def slow(peer: Peer, request: Received) -> None:
        await peer.send([SSE_HEAD, chunk(events[0])])
        await asyncio.sleep(3)
        await peer.send([*map(chunk, events[1:]), LAST_CHUNK])

    upstream.script = slow
    served.ledger.flush()
    before = len(read_rows(served.ledger.path, 1000))
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with httpx.stream("POST", f"{served.url}/v1/chat/completions", json=body) as response:
        assert b"data:" in next(response.iter_raw())
    row = _row_when_recorded(served, before)
    assert row["outcome"] == "client_closed"
    # The stream's usage never came: the hold is what it may have cost, not $0.
    assert row["cost_usd"] == pytest.approx(served.ceiling())
    served.books_agree()


def test_a_json_answer_the_client_hung_up_on_is_billed_by_its_usage(
    served: Served, upstream: Upstream
) -> None:
    async def late(peer: Peer, request: Received) -> None:
        await asyncio.sleep(1)
        await peer.send(_length_framed(_reply()))

    upstream.script = late
    served.ledger.flush()
    before = len(read_rows(served.ledger.path, 1000))
    with pytest.raises(httpx.ReadTimeout):
        served.post(timeout=0.3)
    row = _row_when_recorded(served, before)
    assert (row["outcome"], row["cost_usd"]) == ("ok", _usage_cost())
    served.books_agree()
