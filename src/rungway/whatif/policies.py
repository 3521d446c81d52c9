"""The replayed policies but the oracle: the ladder as served, and three common baselines.

Each is the same `ReplayGateway` (the served planner, budgets and pricing, the plans'
simulated quota) with one thing changed:

- `ladder`: nothing; the quota board reads every answer, as served.
- `always-key`: never the plan; a request goes to the first route off the plan rung the
  ladder gives (the cheapest paid one, or the operator's key for a named model).
- `fallback-429`: reads no quota headers; the plan is tried first until it answers 429,
  then rests for a fixed cooldown (`FALLBACK_COOLDOWN_S`, 300 s by default) and requests
  go up the ladder meanwhile. The common gateway behaviour. Knowing no quota, it takes a
  plan as usable until it refuses, `auto/subscription` requests too.
- `ttl-180s`: the board reads every answer, but the ladder sees it through a reading
  cached for 180 s: a plan judged spent (a window exhausted, or resting) stays benched
  until the cache expires, even past its reset, and one judged usable is tried (and
  refuses) until then.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from rungway.engine.planning import Route
from rungway.protocol.failures import Failure, FailureClass
from rungway.quota.board import QuotaBoard
from rungway.routing.snapshot import ConnectionState, QuotaWindow, WindowStatus
from rungway.whatif.outcome import PolicyRun, World
from rungway.whatif.replay import ReplayGateway, subscription_ids
from rungway.whatif.trace import Trace

__all__ = [
    "FALLBACK_COOLDOWN_S",
    "POLICY_NAMES",
    "TTL_S",
    "AlwaysKey",
    "FallbackOn429",
    "LadderPolicy",
    "TtlCached",
    "replay",
]

FALLBACK_COOLDOWN_S = 300.0
TTL_S = 180.0
POLICY_NAMES = ("ladder", "always-key", "fallback-429", "ttl-180s", "oracle")
_BATCH = 1000
_REJECTED = (WindowStatus.REJECTED,)


def replay(
    name: str, gateway: ReplayGateway, trace: Trace, progress: Callable[[int], None]
) -> PolicyRun:
    """Place every request of `trace` through `gateway`, reporting progress in batches."""
    if trace and trace[0].at > gateway.clock.now():
        gateway.clock.set(trace[0].at)
    placements = []
    place = gateway.place
    for index, request in enumerate(trace):
        placements.append(place(index, request))
        if (index + 1) % _BATCH == 0:
            progress(_BATCH)
    progress(len(trace) % _BATCH)
    return PolicyRun(
        name,
        tuple(placements),
        gateway.window_use(),
        times=tuple(request.at for request in trace),
    )


class LadderPolicy:
    """The ladder exactly as served."""

    name = "ladder"

    def run(self, trace: Trace, world: World, progress: Callable[[int], None]) -> PolicyRun:
        """Replay `trace` through the served planner and quota board."""
        return replay(self.name, ReplayGateway(world, start=_start(trace)), trace, progress)


class AlwaysKey:
    """Never the plan: the ladder's routes off the plan rung."""

    name = "always-key"

    def run(self, trace: Trace, world: World, progress: Callable[[int], None]) -> PolicyRun:
        """Replay `trace` with every plan connection left out."""
        plans = subscription_ids(world)

        def off_plan(route: Route, now: float) -> bool:
            return route.connection.id not in plans

        gateway = ReplayGateway(world, route_filter=off_plan, start=_start(trace))
        return replay(self.name, gateway, trace, progress)


class _FixedCooldowns:
    """Knows only the fixed cooldown each plan gets after a 429; reads no quota, so it
    takes a plan as usable (even to a fail-closed request) until the plan refuses."""

    def __init__(self, cooldown_s: float, plans: frozenset[str]) -> None:
        self._cooldown_s = cooldown_s
        self._plans = plans
        self._until: dict[str, float] = {}

    def connection_states(self, now: float) -> Mapping[str, ConnectionState]:
        """Each plan as usable, or resting after its last 429 while it rests."""
        assumed = (QuotaWindow("assumed", 0.0, None, now),)
        states = {}
        for plan in self._plans:
            until = self._until.get(plan)
            if until is not None and until > now:
                states[plan] = ConnectionState(assumed, cooldown_until=until, cooldown_reason="429")
            else:
                states[plan] = ConnectionState(assumed)
        return states

    def observe(self, connection_id: str, windows: Iterable[QuotaWindow], now: float) -> None:
        """Quota headers are not read."""

    def observe_overage(
        self, connection_id: str, permitted: bool, in_use: bool | None = None
    ) -> None:
        """Overage headers are not read."""

    def failed(self, connection_id: str, failure: Failure, now: float) -> None:
        """A plan's 429 benches it for the fixed cooldown."""
        if connection_id in self._plans and failure.kind in (
            FailureClass.QUOTA_EXHAUSTED,
            FailureClass.RATE_LIMITED,
        ):
            self._until[connection_id] = now + self._cooldown_s

    def succeeded(self, connection_id: str) -> None:
        """A good answer changes nothing."""


class FallbackOn429:
    """The plan until it refuses, then the key for a fixed cooldown."""

    name = "fallback-429"

    def __init__(self, cooldown_s: float = FALLBACK_COOLDOWN_S) -> None:
        self.cooldown_s = cooldown_s

    def run(self, trace: Trace, world: World, progress: Callable[[int], None]) -> PolicyRun:
        """Replay `trace` reading no quota, benching a plan for a fixed time after a 429."""
        cooldowns = _FixedCooldowns(self.cooldown_s, subscription_ids(world))
        gateway = ReplayGateway(world, state=cooldowns, observer=cooldowns, start=_start(trace))
        return replay(self.name, gateway, trace, progress)


class _CachedReading:
    """The board's verdict on each connection, read again only once it is `ttl_s` old."""

    def __init__(self, board: QuotaBoard, ttl_s: float) -> None:
        self._board = board
        self._ttl_s = ttl_s
        self._read_at = float("-inf")
        self._states: dict[str, ConnectionState] = {}

    def connection_states(self, now: float) -> Mapping[str, ConnectionState]:
        """The cached reading: a connection unusable when read rests until it expires; one
        never read yet is read as soon as the board has it."""
        board = self._board.connection_states(now)
        if now - self._read_at >= self._ttl_s:
            self._read_at = now
            self._states = {}
        if len(self._states) < len(board):
            until = self._read_at + self._ttl_s
            for connection_id, state in board.items():
                if connection_id in self._states:
                    continue
                # The cache holds the board as read now: its readings are as old as it is.
                read = replace(
                    state, windows=tuple(replace(w, checked_at=now) for w in state.windows)
                )
                if _unusable(state, now):
                    read = replace(read, cooldown_until=until, cooldown_reason="cached")
                self._states[connection_id] = read
        return self._states


def _unusable(state: ConnectionState, now: float) -> bool:
    if state.cooldown_until is not None and state.cooldown_until > now:
        return True
    return any(
        (window.was_exhausted or window.status in _REJECTED)
        and (window.resets_at is None or window.resets_at > now)
        for window in state.windows
    )


class TtlCached:
    """The board read through a 180 s cache: re-entry only when the cache expires."""

    name = "ttl-180s"

    def __init__(self, ttl_s: float = TTL_S) -> None:
        self.ttl_s = ttl_s

    def run(self, trace: Trace, world: World, progress: Callable[[int], None]) -> PolicyRun:
        """Replay `trace` with the ladder judging a reading cached for `ttl_s`."""
        board = QuotaBoard(world.settings.ladder)
        cached = _CachedReading(board, self.ttl_s)
        gateway = ReplayGateway(world, board=board, state=cached, start=_start(trace))
        return replay(self.name, gateway, trace, progress)


def _start(trace: Trace) -> float:
    return trace[0].at if trace else 0.0
