"""The control HTTP API of a simulated upstream, for out-of-process drivers (CLI, demo,
benchmarks), and the state snapshot it reports.

    POST /_sim/faults    a fault object or a list of them; queued at the back
    POST /_sim/clock     {"advance_s": x} or {"set": epoch}; only on a FakeClock
    GET  /_sim/state     now, windows, credits, tally, queued faults, request count
    GET  /_sim/requests  the recorded requests (most recent last)
    POST /_sim/reset     empty windows, credits, tally and logs; restore the faults
    POST /_sim/windows   {"name": window, "used": units}; steer a window to a level
    POST /_sim/credits   {"remaining": credits}; an OpenRouter key with a limit only

The usage endpoints read the same windows and credits, so what these controls change
(a fault exhausting a window, a clock jump past a reset, credits set) shows there too.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from rungway.clock import Clock, FakeClock
from rungway.sim.exchange import RecordedRequest, Reply, json_reply
from rungway.sim.faults import Fault, QueuedFault, parse_faults
from rungway.sim.quota.credits import CreditState
from rungway.sim.quota.windows import WindowReading
from rungway.sim.tally import ModelTally


class WindowState(BaseModel):
    """One window as reported by `GET /_sim/state`."""

    model_config = ConfigDict(frozen=True)

    name: str
    claim: str
    unit: str
    model: str | None
    used: int
    capacity: int
    remaining: int
    utilization: float
    reset_at: float

    @classmethod
    def of(cls, reading: WindowReading) -> WindowState:
        """Describe a reading."""
        return cls(
            name=reading.spec.name,
            claim=reading.spec.claim_name,
            unit=reading.spec.unit,
            model=reading.spec.model,
            used=reading.used,
            capacity=reading.capacity,
            remaining=reading.remaining,
            utilization=reading.utilization,
            reset_at=reading.reset_at,
        )


class SimState(BaseModel):
    """A snapshot of a simulated upstream."""

    model_config = ConfigDict(frozen=True)

    scenario: str
    api: str
    now: float
    fake_clock: bool
    windows: list[WindowState]
    tally: dict[str, ModelTally]
    faults: list[QueuedFault]
    request_count: int
    credits: CreditState | None = None

    def window(self, name: str) -> WindowState:
        """The window called `name`."""
        for window in self.windows:
            if window.name == name:
                return window
        raise KeyError(name)


class Controllable(Protocol):
    """What the control API drives."""

    @property
    def clock(self) -> Clock:
        """The upstream's clock."""
        ...

    @property
    def requests(self) -> list[RecordedRequest]:
        """Requests received so far."""
        ...

    def push_fault(self, fault: Fault) -> None:
        """Queue a fault."""
        ...

    def state(self) -> SimState:
        """Snapshot the upstream."""
        ...

    def reset(self) -> None:
        """Return to the scenario's initial state (the clock keeps its time)."""
        ...

    def set_window_used(self, name: str, used: int) -> None:
        """Set the units used in one window."""
        ...

    def set_credits_remaining(self, remaining: float) -> None:
        """Set the credits left; ValueError when the upstream has no credit limit."""
        ...


def _problem(status: int, message: str) -> Reply:
    return json_reply(status, {"error": message})


def _move_clock(sim: Controllable, body: Any) -> Reply:
    clock = sim.clock
    if not isinstance(clock, FakeClock):
        return _problem(409, "this sim runs on the real clock; give its scenario clock.start")
    if not isinstance(body, dict) or len(body.keys() & {"advance_s", "set"}) != 1:
        return _problem(400, 'send {"advance_s": seconds} or {"set": epoch_seconds}')
    try:
        if "advance_s" in body:
            clock.advance(float(body["advance_s"]))
        else:
            clock.set(float(body["set"]))
    except (TypeError, ValueError) as exc:
        return _problem(400, str(exc))
    return json_reply(200, {"now": clock.now()})


def _set_credits(sim: Controllable, body: Any) -> Reply:
    if not isinstance(body, dict) or set(body) != {"remaining"}:
        return _problem(400, 'send {"remaining": credits}')
    remaining = body["remaining"]
    if not isinstance(remaining, int | float) or isinstance(remaining, bool):
        return _problem(400, "remaining must be a number")
    try:
        sim.set_credits_remaining(float(remaining))
    except ValueError as exc:
        return _problem(409, str(exc))
    return json_reply(200, {"limit_remaining": float(remaining)})


def _set_window(sim: Controllable, body: Any) -> Reply:
    if not isinstance(body, dict) or set(body) != {"name", "used"}:
        return _problem(400, 'send {"name": window, "used": units}')
    name, used = body["name"], body["used"]
    if not isinstance(name, str) or not isinstance(used, int) or isinstance(used, bool):
        return _problem(400, "name must be a string and used a whole number of units")
    if used < 0:
        return _problem(400, "used must be 0 or more")
    try:
        sim.set_window_used(name, used)
    except ValueError as exc:
        return _problem(404, str(exc))
    return json_reply(200, sim.state().window(name).model_dump())


def _recorded(request: RecordedRequest) -> dict[str, Any]:
    return {
        "method": request.method,
        "path": request.path,
        "query": request.query,
        "headers": dict(request.headers),
        "body": request.body,
    }


def handle_control(sim: Controllable, request: RecordedRequest) -> Reply:
    """Answer one `/_sim/...` request."""
    if request.raw_body and request.body is None:
        return _problem(400, "the body is not JSON")
    body, method, path = request.body, request.method, request.path
    route = (method, path)
    if route == ("POST", "/_sim/faults"):
        try:
            faults = parse_faults(body)
        except ValidationError as exc:
            return _problem(422, str(exc))
        for fault in faults:
            sim.push_fault(fault)
        return json_reply(200, {"queued": len(faults)})
    if route == ("POST", "/_sim/clock"):
        return _move_clock(sim, body)
    if route == ("GET", "/_sim/state"):
        return Reply(200, sim.state().model_dump_json().encode())
    if route == ("GET", "/_sim/requests"):
        return json_reply(200, [_recorded(seen) for seen in sim.requests])
    if route == ("POST", "/_sim/reset"):
        sim.reset()
        return json_reply(200, {"reset": True})
    if route == ("POST", "/_sim/windows"):
        return _set_window(sim, body)
    if route == ("POST", "/_sim/credits"):
        return _set_credits(sim, body)
    return _problem(404, f"no control route {method} {path}")
