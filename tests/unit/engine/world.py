"""An engine over simulated upstreams in this process: its budget, ledger and routes.

Shared by the engine's unit tests: `gateway_of` wires an `Engine` to in-process upstreams
by name (`http://<name>.test`), a budget that holds every paid attempt and a ledger in
memory.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping
from typing import Any

import orjson
from pydantic import SecretStr

from rungway.adapters.base import Connection
from rungway.adapters.registry import provider_entry
from rungway.budget import HeldFor, Reservation
from rungway.clock import FakeClock
from rungway.config import TimeoutSettings
from rungway.engine.call import Call, StreamReply
from rungway.engine.dispatch import Engine
from rungway.engine.planning import Plan, Route
from rungway.engine.record import RequestRecord
from rungway.engine.state import NoTelemetry
from rungway.protocol.api import Api
from rungway.protocol.auth import Auth
from rungway.routing.plan import RoutePlan
from rungway.routing.resolve import Resolution, Target
from rungway.routing.rungs import Rung
from rungway.routing.snapshot import RungSpend
from rungway.sim import Scenario, SimUpstream
from rungway.translate.codecs import codec_for
from tests.inprocess import App, InProcessTransport

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


def openai_sim(**scenario: Any) -> SimUpstream:
    """A simulated OpenAI-compatible upstream serving `MODEL`, with `scenario`'s fields."""
    model: dict[str, Any] = {"id": MODEL, **scenario.pop("model", {})}
    return SimUpstream(
        Scenario.model_validate({"name": "sim", "api": "openai", "models": [model], **scenario})
    )


def openai_route(name: str, provider: str = "openai") -> Route:
    """A cheap-rung route to `MODEL` at `http://<name>.test`, through `provider`'s adapter."""
    entry = provider_entry(provider)
    connection = Connection(
        id=name,
        provider=provider,
        auth=Auth.APIKEY,
        secret=SecretStr(f"sk-{name}"),
        base_url=f"http://{name}.test/v1" if provider == "openai" else f"http://{name}.test",
        models=frozenset({MODEL}),
    )
    return Route(Target(name, MODEL), connection, entry.adapter, Rung.CHEAP)


def plan_of(*names: str, provider: str = "openai") -> Plan:
    """A plan that tries the routes of `names`, in order."""
    return plan_with(*(openai_route(name, provider) for name in names))


def plan_with(*routes: Route) -> Plan:
    """A plan that tries `routes`, in order."""
    resolution = Resolution(MODEL, MODEL, tuple(route.target for route in routes))
    return Plan.of(resolution, list(routes), RoutePlan(MODEL, None, None, (), ()))


def chat_call(*, stream: bool = False, max_tokens: int = 64) -> Call:
    """A client's OpenAI Chat request for `MODEL`."""
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


def gateway_of(**apps: App) -> Gateway:
    return Gateway(InProcessTransport({f"http://{name}.test": app for name, app in apps.items()}))


async def read_stream(outcome: object) -> bytes:
    """The whole body of a stream outcome."""
    assert isinstance(outcome, StreamReply)
    return b"".join([chunk async for chunk in outcome.body])
