"""The engine's attempt loop over simulated upstreams in this process (no sockets).

Falling through to the next connection, a second try on the same one, a stream's commit
and relay, and the budget hold each attempt takes: settled or released on every path,
an exception or a cancellation mid-attempt included.
"""

from __future__ import annotations

import asyncio

import orjson
import pytest

from rungway.adapters.base import UpstreamRequest
from rungway.engine.call import Refusal, Reply, StreamReply
from rungway.engine.planning import Plan
from rungway.engine.transport import UpstreamResponse
from tests.inprocess import InProcessTransport
from tests.unit.engine.world import (
    Gateway,
    chat_call,
    gateway_of,
    openai_route,
    openai_sim,
    plan_of,
    read_stream,
)


def test_an_unreachable_connection_falls_through_to_the_next() -> None:
    gateway = gateway_of(b=openai_sim())
    outcome = asyncio.run(gateway.engine.complete(chat_call(), plan_of("a", "b")))
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
    failing = openai_sim(faults=[{"kind": "http_error", "status": 500}])
    gateway = gateway_of(a=failing, b=openai_sim())
    outcome = asyncio.run(gateway.engine.complete(chat_call(), plan_of("a", "b")))
    assert isinstance(outcome, Reply)
    assert outcome.status == 200
    [row] = gateway.ledger.rows
    assert row.connection_id == "b"
    assert [(a.connection_id, a.status) for a in row.attempts] == [("a", 500)]
    assert len(failing.requests) == 1
    assert gateway.nothing_held()


def test_every_connection_failing_gives_up_with_one_row() -> None:
    gateway = gateway_of()
    outcome = asyncio.run(gateway.engine.complete(chat_call(), plan_of("a", "b")))
    assert isinstance(outcome, Refusal)
    [row] = gateway.ledger.rows
    assert row.connection_id is None
    assert [a.connection_id for a in row.attempts] == ["a", "b"]
    assert gateway.nothing_held()
    assert len(gateway.budget.released) == 2


def test_a_refusal_naming_the_output_limit_is_tried_again_within_it() -> None:
    limited = openai_sim(model={"max_output_tokens": 100})
    gateway = gateway_of(a=limited)
    outcome = asyncio.run(gateway.engine.complete(chat_call(max_tokens=5000), plan_of("a")))
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


def test_a_stream_is_committed_relayed_and_recorded_once() -> None:
    gateway = gateway_of(a=openai_sim(response={"output_tokens": 12, "chunk_tokens": 4}))

    async def run() -> bytes:
        outcome = await gateway.engine.complete(chat_call(stream=True), plan_of("a"))
        # Committed, not yet recorded: the row is written when the stream ends.
        assert gateway.ledger.rows == []
        return await read_stream(outcome)

    body = asyncio.run(run())
    assert body.rstrip().endswith(b"data: [DONE]")
    [row] = gateway.ledger.rows
    assert (row.connection_id, row.outcome, row.stream) == ("a", "ok", True)
    assert row.usage.output_tokens == 12
    assert gateway.nothing_held()
    assert len(gateway.budget.settled) == 1


def test_a_stream_dropped_before_its_content_falls_through() -> None:
    dropping = openai_sim(faults=[{"kind": "disconnect"}])
    gateway = gateway_of(a=dropping, b=openai_sim())
    body = asyncio.run(_stream(gateway, plan_of("a", "b")))
    assert body.rstrip().endswith(b"data: [DONE]")
    [row] = gateway.ledger.rows
    assert row.connection_id == "b"
    assert [(a.connection_id, a.outcome) for a in row.attempts] == [("a", "network")]
    assert gateway.nothing_held()


def test_a_stream_cut_off_after_its_content_ends_with_an_error_event() -> None:
    gateway = gateway_of(
        a=openai_sim(faults=[{"kind": "disconnect", "after_events": 2}]), b=openai_sim()
    )
    body = asyncio.run(_stream(gateway, plan_of("a", "b")))
    # The client's API's in-stream error event, after the content relayed so far.
    assert b"chat.completion.chunk" in body
    assert b'"code":"network"' in body
    [row] = gateway.ledger.rows
    assert (row.connection_id, row.outcome) == ("a", "network")
    assert gateway.nothing_held()
    assert len(gateway.budget.settled) == 1


def test_a_client_leaving_a_stream_settles_its_hold() -> None:
    paced = {"output_tokens": 40, "chunk_tokens": 4, "chunk_interval_ms": 1}
    gateway = gateway_of(a=openai_sim(response=paced))

    async def run() -> None:
        outcome = await gateway.engine.complete(chat_call(stream=True), plan_of("a"))
        assert isinstance(outcome, StreamReply)
        assert await anext(outcome.body)
        await outcome.body.aclose()  # type: ignore[attr-defined]

    asyncio.run(run())
    [row] = gateway.ledger.rows
    assert row.outcome == "client_closed"
    assert gateway.nothing_held()
    assert len(gateway.budget.settled) == 1


async def _stream(gateway: Gateway, plan: Plan) -> bytes:
    return await read_stream(await gateway.engine.complete(chat_call(stream=True), plan))


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
    gateway = Gateway(Breaking(InProcessTransport({"http://a.test": openai_sim()})))
    outcome = asyncio.run(gateway.engine.complete(chat_call(), plan_of("a", "b")))
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
        task = asyncio.create_task(gateway.engine.complete(chat_call(), plan_of("a")))
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
    gateway = gateway_of(a=openai_sim())
    route = openai_route("a")

    def broken(*args: object, **kwargs: object) -> UpstreamRequest:
        raise RuntimeError("a fault in the adapter")

    monkeypatch.setattr(type(route.adapter), "build_request", broken)
    outcome = asyncio.run(gateway.engine.complete(chat_call(), plan_of("a")))
    assert isinstance(outcome, Refusal)
    assert outcome.code == "gateway_error"
    # Nothing went upstream, so there is nothing to record or bill.
    assert gateway.transport.sent == []
    assert gateway.ledger.rows == []
    assert gateway.nothing_held()
