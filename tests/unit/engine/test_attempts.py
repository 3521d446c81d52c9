"""The engine's attempt loop over simulated upstreams in this process (no sockets).

Falling through to the next connection, a second try on the same one, a stream's commit
and relay, and the budget hold each attempt takes: settled or released on every path,
an exception or a cancellation mid-attempt included.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Mapping
from typing import Any

import orjson
import pytest
from pydantic import SecretStr

from rungway.adapters.base import Connection, UpstreamRequest
from rungway.adapters.registry import provider_entry
from rungway.budget import HeldFor, Reservation
from rungway.clock import FakeClock
from rungway.config import TimeoutSettings
from rungway.engine.call import Call, Refusal, Reply, StreamReply
from rungway.engine.dispatch import Engine
from rungway.engine.planning import Plan, Route
from rungway.engine.record import RequestRecord
from rungway.engine.state import NoTelemetry
from rungway.engine.transport import UpstreamResponse
from rungway.protocol.api import Api
from rungway.protocol.auth import Auth
from rungway.routing.plan import RoutePlan
from rungway.routing.resolve import Resolution, Target
from rungway.routing.rungs import Rung
from rungway.routing.snapshot import RungSpend
from rungway.sim import Scenario, SimUpstream
from rungway.translate.codecs import codec_for
from tests.inprocess import InProcessTransport

MODEL = "gpt-4o-mini"


class HeldBudget:
    """A budget that holds every paid attempt and remembers how each hold ended."""

    def __init__(self) -> None:
        self.open: dict[int, Reservation] = {}
        self.settled: list[tuple[Reservation, float]] = []
        self.released: list[Reservation] = []
        self._ids = itertools.count(1)

    async def reserve(
        self,
        rung: Rung,
        client_key: str | None,
        amount: float,
        now: float,
        *,
        held_for: HeldFor | None = None,
    ) -> Reservation:
        reservation = Reservation(next(self._ids), rung, client_key, amount, now + 600)
        self.open[reservation.id] = reservation
        return reservation

    def settle(self, reservation: Reservation, cost: float, now: float) -> None:
        del self.open[reservation.id]
        self.settled.append((reservation, cost))

    def spend(
        self,
        rung: Rung,
        client_key: str | None,
        cost: float,
        now: float,
        *,
        request_id: str | None = None,
    ) -> None:
        raise AssertionError("every paid attempt here holds first")

    def release(self, reservation: Reservation) -> None:
        del self.open[reservation.id]
        self.released.append(reservation)

    def rung_spend(self, now: float) -> Mapping[Rung, RungSpend]:
        return {}


class Rows:
    """The ledger: each row, and the hold it settled."""

    def __init__(self) -> None:
        self.rows: list[RequestRecord] = []

    def record(self, row: RequestRecord, settles: Reservation | None = None) -> None:
        self.rows.append(row)


def _sim(**scenario: Any) -> SimUpstream:
    model: dict[str, Any] = {"id": MODEL, **scenario.pop("model", {})}
    return SimUpstream(
        Scenario.model_validate({"name": "sim", "api": "openai", "models": [model], **scenario})
    )


def _route(name: str) -> Route:
    entry = provider_entry("openai")
    connection = Connection(
        id=name,
        provider="openai",
        auth=Auth.APIKEY,
        secret=SecretStr(f"sk-{name}"),
        base_url=f"http://{name}.test/v1",
        models=frozenset({MODEL}),
    )
    return Route(Target(name, MODEL), connection, entry.adapter, Rung.CHEAP)


def _plan(*names: str) -> Plan:
    routes = [_route(name) for name in names]
    resolution = Resolution(MODEL, MODEL, tuple(route.target for route in routes))
    return Plan.of(resolution, routes, RoutePlan(MODEL, None, None, (), ()))


def _call(*, stream: bool = False, max_tokens: int = 64) -> Call:
    body = {
        "model": MODEL,
        "stream": stream,
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": "hi"}],
    }
    return Call(
        request_id="req-1",
        api=Api.OPENAI_CHAT,
        body=body,
        raw_body=orjson.dumps(body),
        stream=stream,
        headers={},
        query="",
        client_key=None,
        started_at=time.time(),
        started=time.perf_counter(),
    )


class Gateway:
    """An engine wired to in-process upstreams, a holding budget and a ledger in memory."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport
        self.budget = HeldBudget()
        self.ledger = Rows()
        self.engine = Engine(
            transport=transport,
            timeouts=TimeoutSettings(),
            recorder=self.ledger,
            quota=NoTelemetry(),
            budget=self.budget,
            clock=FakeClock(),
            codec_for=codec_for,
        )

    def nothing_held(self) -> bool:
        """No hold is left open, and no upstream response either."""
        transport = self.transport
        responses = transport.open if isinstance(transport, InProcessTransport) else set()
        return not self.budget.open and not responses


def _gateway(**apps: SimUpstream) -> Gateway:
    return Gateway(InProcessTransport({f"http://{name}.test": app for name, app in apps.items()}))


def test_an_unreachable_connection_falls_through_to_the_next() -> None:
    gateway = _gateway(b=_sim())
    outcome = asyncio.run(gateway.engine.complete(_call(), _plan("a", "b")))
    assert isinstance(outcome, Reply)
    assert outcome.status == 200
    assert ("x-rungway-connection", "b") in outcome.headers
    [row] = gateway.ledger.rows
    assert (row.connection_id, row.outcome, row.status) == ("b", "ok", 200)
    assert [(a.connection_id, a.outcome) for a in row.attempts] == [("a", "network")]
    # The unreachable attempt's hold is released, the serving one's settled to its cost.
    assert gateway.nothing_held()
    assert len(gateway.budget.released) == len(gateway.budget.settled) == 1
    [(_, cost)] = gateway.budget.settled
    assert cost == row.cost_usd > 0


def test_an_upstream_error_falls_through_to_the_next() -> None:
    failing = _sim(faults=[{"kind": "http_error", "status": 500}])
    gateway = _gateway(a=failing, b=_sim())
    outcome = asyncio.run(gateway.engine.complete(_call(), _plan("a", "b")))
    assert isinstance(outcome, Reply)
    assert outcome.status == 200
    [row] = gateway.ledger.rows
    assert row.connection_id == "b"
    assert [(a.connection_id, a.status) for a in row.attempts] == [("a", 500)]
    assert len(failing.requests) == 1
    assert gateway.nothing_held()


def test_every_connection_failing_gives_up_with_one_row() -> None:
    gateway = _gateway()
    outcome = asyncio.run(gateway.engine.complete(_call(), _plan("a", "b")))
    assert isinstance(outcome, Refusal)
    [row] = gateway.ledger.rows
    assert row.connection_id is None
    assert [a.connection_id for a in row.attempts] == ["a", "b"]
    assert gateway.nothing_held()
    assert len(gateway.budget.released) == 2


def test_a_refusal_naming_the_output_limit_is_tried_again_within_it() -> None:
    limited = _sim(model={"max_output_tokens": 100})
    gateway = _gateway(a=limited)
    outcome = asyncio.run(gateway.engine.complete(_call(max_tokens=5000), _plan("a")))
    assert isinstance(outcome, Reply)
    assert outcome.status == 200
    first, second = (orjson.loads(request.body) for request in gateway.transport.sent)
    assert first["max_tokens"] == 5000
    assert second["max_tokens"] == 100
    [row] = gateway.ledger.rows
    assert (row.connection_id, row.outcome) == ("a", "ok")
    # The second try's hold, priced from the smaller body, replaced the first's.
    assert gateway.nothing_held()
    [replaced] = gateway.budget.released
    [(kept, _)] = gateway.budget.settled
    assert kept.amount < replaced.amount


async def _read(outcome: object) -> bytes:
    assert isinstance(outcome, StreamReply)
    return b"".join([chunk async for chunk in outcome.body])


def test_a_stream_is_committed_relayed_and_recorded_once() -> None:
    gateway = _gateway(a=_sim(response={"output_tokens": 12, "chunk_tokens": 4}))

    async def run() -> bytes:
        outcome = await gateway.engine.complete(_call(stream=True), _plan("a"))
        # Committed, not yet recorded: the row is written when the stream ends.
        assert gateway.ledger.rows == []
        return await _read(outcome)

    body = asyncio.run(run())
    assert body.rstrip().endswith(b"data: [DONE]")
    [row] = gateway.ledger.rows
    assert (row.connection_id, row.outcome, row.stream) == ("a", "ok", True)
    assert row.usage.output_tokens == 12
    assert gateway.nothing_held()
    assert len(gateway.budget.settled) == 1


def test_a_stream_dropped_before_its_content_falls_through() -> None:
    dropping = _sim(faults=[{"kind": "disconnect"}])
    gateway = _gateway(a=dropping, b=_sim())
    body = asyncio.run(_stream(gateway, _plan("a", "b")))
    assert body.rstrip().endswith(b"data: [DONE]")
    [row] = gateway.ledger.rows
    assert row.connection_id == "b"
    assert [(a.connection_id, a.outcome) for a in row.attempts] == [("a", "network")]
    assert gateway.nothing_held()


def test_a_stream_cut_off_after_its_content_ends_with_an_error_event() -> None:
    gateway = _gateway(a=_sim(faults=[{"kind": "disconnect", "after_events": 2}]), b=_sim())
    body = asyncio.run(_stream(gateway, _plan("a", "b")))
    # The client's API's in-stream error event, after the content relayed so far.
    assert b"chat.completion.chunk" in body
    assert b'"code":"network"' in body
    [row] = gateway.ledger.rows
    assert (row.connection_id, row.outcome) == ("a", "network")
    assert gateway.nothing_held()
    assert len(gateway.budget.settled) == 1


def test_a_client_leaving_a_stream_settles_its_hold() -> None:
    paced = {"output_tokens": 40, "chunk_tokens": 4, "chunk_interval_ms": 1}
    gateway = _gateway(a=_sim(response=paced))

    async def run() -> None:
        outcome = await gateway.engine.complete(_call(stream=True), _plan("a"))
        assert isinstance(outcome, StreamReply)
        assert await anext(outcome.body)
        await outcome.body.aclose()  # type: ignore[attr-defined]

    asyncio.run(run())
    [row] = gateway.ledger.rows
    assert row.outcome == "client_closed"
    assert gateway.nothing_held()
    assert len(gateway.budget.settled) == 1


async def _stream(gateway: Gateway, plan: Plan) -> bytes:
    return await _read(await gateway.engine.complete(_call(stream=True), plan))


class Breaking:
    """Sends each request on, then raises as a fault in the gateway would."""

    def __init__(self, inner: InProcessTransport) -> None:
        self.inner = inner
        self.open = inner.open

    async def send(self, request: UpstreamRequest) -> UpstreamResponse:
        response = await self.inner.send(request)
        response.close()
        raise RuntimeError("a fault in the gateway")


def test_an_attempt_that_raises_after_sending_settles_its_hold_whole() -> None:
    gateway = Gateway(Breaking(InProcessTransport({"http://a.test": _sim()})))
    outcome = asyncio.run(gateway.engine.complete(_call(), _plan("a", "b")))
    assert isinstance(outcome, Refusal)
    assert (outcome.status, outcome.code) == (500, "gateway_error")
    [row] = gateway.ledger.rows
    assert (row.connection_id, row.outcome) == ("a", "gateway_error")
    # The upstream may have billed it: its whole hold is counted, not forgotten.
    [(held, cost)] = gateway.budget.settled
    assert cost == held.amount == row.cost_usd
    assert not gateway.budget.open
    assert not gateway.budget.released


class Hanging:
    """Never answers: the attempt waits until it is cancelled."""

    def __init__(self) -> None:
        self.sent = asyncio.Event()

    async def send(self, request: UpstreamRequest) -> UpstreamResponse:
        self.sent.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def test_a_cancelled_attempt_settles_its_hold_whole() -> None:
    transport = Hanging()
    gateway = Gateway(transport)

    async def run() -> None:
        task = asyncio.create_task(gateway.engine.complete(_call(), _plan("a")))
        await transport.sent.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    [row] = gateway.ledger.rows
    assert (row.outcome, row.status) == ("cancelled", 499)
    [(held, cost)] = gateway.budget.settled
    assert cost == held.amount
    assert not gateway.budget.open


def test_a_fault_before_the_hold_leaves_nothing_held(monkeypatch: pytest.MonkeyPatch) -> None:
    gateway = _gateway(a=_sim())
    route = _route("a")

    def broken(*args: object, **kwargs: object) -> UpstreamRequest:
        raise RuntimeError("a fault in the adapter")

    monkeypatch.setattr(type(route.adapter), "build_request", broken)
    outcome = asyncio.run(gateway.engine.complete(_call(), _plan("a")))
    assert isinstance(outcome, Refusal)
    assert outcome.code == "gateway_error"
    # Nothing went upstream, so there is nothing to record or bill.
    assert gateway.transport.sent == []
    assert gateway.ledger.rows == []
    assert gateway.nothing_held()
