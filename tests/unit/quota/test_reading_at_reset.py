"""At a window's reset the plan's usage is read again inline, not judged on the old window:
the poller asks for a reading once a window it holds has reset, even while another window
of the plan is fresh, and polls only once for that reset."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from rungway.clock import FakeClock
from rungway.quota.board import QuotaBoard
from rungway.quota.poller import PollTarget, UsagePoller
from rungway.quota.usage import PolledReading
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import QuotaWindow, WindowStatus

NOW = 1_790_000_000.0
SETTINGS = LadderSettings()


def window(name: str, used: float, resets_at: float, checked_at: float) -> QuotaWindow:
    status = WindowStatus.REJECTED if used >= 100 else WindowStatus.ALLOWED
    return QuotaWindow(name, used, resets_at, checked_at, status=status)


class Endpoint:
    """A usage endpoint that reports the plan's windows as of the clock's time."""

    def __init__(self, clock: FakeClock, reset: float) -> None:
        self.clock = clock
        self.reset = reset
        self.polls = 0

    async def fetch(
        self, url: str, headers: Mapping[str, str], deadline_s: float, **_: object
    ) -> tuple[int, Mapping[str, str], bytes]:
        self.polls += 1
        return 200, {}, b"{}"

    def read(self, body: bytes, now: float) -> PolledReading:
        five = (
            window("5h", 100.0, self.reset, now)
            if now < self.reset
            else window("5h", 0.0, self.reset + 18_000, now)
        )
        return PolledReading((five, window("7d", 40.0, now + 86_400, now)))


def world() -> tuple[FakeClock, QuotaBoard, UsagePoller, Endpoint]:
    clock = FakeClock(NOW)
    board = QuotaBoard(SETTINGS)
    endpoint = Endpoint(clock, NOW + 600)
    target = PollTarget("plan", "http://127.0.0.1:1/usage", {}, endpoint.read)
    poller = UsagePoller(board, [target], endpoint.fetch, clock, SETTINGS)
    return clock, board, poller, endpoint


def test_a_window_past_its_reset_needs_a_reading_though_another_is_fresh() -> None:
    clock, board, poller, endpoint = world()
    asyncio.run(poller.verify(["plan"]))
    assert endpoint.polls == 1
    # A fresh 7d reading (from a response's headers) a few seconds before the reset.
    clock.set(endpoint.reset - 10)
    board.observe("plan", [window("7d", 41.0, clock.now() + 86_400, clock.now())], clock.now())
    assert not poller.needs_reading("plan", clock.now())
    clock.set(endpoint.reset + 0.5)
    assert poller.needs_reading("plan", clock.now())
    asyncio.run(poller.verify(["plan"]))
    assert endpoint.polls == 2
    five = next(w for w in board.connection_states(clock.now())["plan"].windows if w.name == "5h")
    assert five.used_percent == 0.0
    assert five.resets_at == endpoint.reset + 18_000
    # Read once for that reset: the next request needs no second poll.
    asyncio.run(poller.verify(["plan"]))
    assert endpoint.polls == 2


def test_a_reset_the_endpoint_does_not_report_is_polled_once_not_per_request() -> None:
    clock, board, poller, endpoint = world()
    asyncio.run(poller.verify(["plan"]))
    # A window only a response's headers report, past its reset.
    board.observe("plan", [window("1h", 100.0, clock.now() + 60, clock.now())], clock.now())
    clock.advance(61)
    asyncio.run(poller.verify(["plan"]))
    asyncio.run(poller.verify(["plan"]))
    assert endpoint.polls == 2
