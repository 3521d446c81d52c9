"""A pool of simulated plan accounts: several accounts of one plan, bought at different times.

A scenario with `pool` (`PoolSpec`) stands for `accounts` accounts of its plan. Each is a
`SimUpstream` of its own, on its own port, as a distinct login would be: its own credential
(the scenario's token with `-1`, `-2`, ... appended), its own name (`<scenario>-1`, ...),
its own windows and usage endpoint, and whatever else a sim keeps per account (its prompt
cache). Their windows are staggered: account `i`'s run on a grid `(i - 1) * stagger_s`
after account 1's (by default each window's length over the number of accounts), so their
resets fall at different instants, as those of accounts bought on different days do, and
as `rungway whatif --accounts` staggers its accounts. They share
one clock, so a test moving a FakeClock moves every account's windows together.

The built-in `claude-pool` scenario is three Claude plan accounts:

    rungway sim-upstream --scenario claude-pool --port 0

serves them and prints a connection for each. From Python:

    with SimPool(load_scenario(builtin_scenario("claude-pool"))) as pool:
        urls = pool.urls  # one per account

A scenario without `pool` makes a pool of one account, the scenario itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Self

from rungway.clock import Clock, FakeClock, SystemClock
from rungway.sim.scenario import Scenario, WindowSpec
from rungway.sim.server import SimUpstream

__all__ = ["SimPool", "pool_accounts"]


def pool_accounts(scenario: Scenario) -> tuple[Scenario, ...]:
    """The scenario of each account of a pool scenario, in order (itself when not a pool)."""
    pool = scenario.pool
    if pool is None:
        return (scenario,)
    accounts = []
    for account in range(1, pool.accounts + 1):
        token = scenario.auth.token
        auth = scenario.auth.model_copy(update={"token": f"{token}-{account}"})
        windows = tuple(
            _staggered(window, pool.started_ago_s(account, window.length_s))
            for window in scenario.windows
        )
        accounts.append(
            scenario.model_copy(
                update={
                    "name": f"{scenario.name}-{account}",
                    "auth": auth,
                    "windows": windows,
                    "pool": None,
                }
            )
        )
    return tuple(accounts)


def _staggered(window: WindowSpec, started_ago_s: float) -> WindowSpec:
    if window.reset_zone is not None or window.first_reset_at is not None:
        # A window on the calendar or at a set instant resets at the same instant for all.
        return window
    return window.model_copy(update={"started_ago_s": started_ago_s})


class SimPool:
    """Every account of a pool scenario, each a `SimUpstream`, on one clock.

    Without an explicit `clock`, a scenario with `clock.start` (or `clock.fake`) runs on
    one FakeClock and any other on the system clock.
    """

    def __init__(self, scenario: Scenario, clock: Clock | None = None) -> None:
        if clock is None:
            fake = scenario.clock.start is not None or scenario.clock.fake
            clock = FakeClock(scenario.clock.start) if fake else SystemClock()
        self.scenario = scenario
        self._clock = clock
        self.accounts = tuple(SimUpstream(account, clock) for account in pool_accounts(scenario))

    @property
    def clock(self) -> Clock:
        """The clock every account's windows are read against."""
        return self._clock

    @property
    def fake_clock(self) -> FakeClock:
        """The FakeClock the pool runs on (raises when it runs on the real clock)."""
        if not isinstance(self._clock, FakeClock):
            raise RuntimeError(f"pool {self.scenario.name!r} runs on the real clock")
        return self._clock

    @property
    def urls(self) -> list[str]:
        """Each running account's base URL, in account order."""
        return [account.url for account in self.accounts]

    def __iter__(self) -> Iterator[SimUpstream]:
        return iter(self.accounts)

    def __len__(self) -> int:
        return len(self.accounts)

    def start(self, host: str = "127.0.0.1", port: int = 0) -> list[str]:
        """Serve every account in a daemon thread, on `port`, `port + 1`, ... (0 picks a
        free port for each); return their URLs."""
        try:
            for offset, account in enumerate(self.accounts):
                account.start(host, port + offset if port else 0)
        except BaseException:
            self.stop()
            raise
        return self.urls

    def stop(self) -> None:
        """Stop every running account."""
        for account in self.accounts:
            account.stop()

    def reset(self) -> None:
        """Reset every account (see `SimUpstream.reset`): windows restart staggered from now."""
        for account in self.accounts:
            account.reset()

    def serve(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        on_ready: Callable[[list[str]], None] | None = None,
    ) -> None:
        """Serve every account until interrupted (Ctrl-C); `on_ready` gets their URLs."""
        urls = self.start(host, port)
        try:
            if on_ready is not None:
                on_ready(urls)
            while True:
                time.sleep(3600)
        finally:
            self.stop()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
