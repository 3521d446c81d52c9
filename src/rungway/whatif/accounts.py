"""Several accounts of one plan, bought on different days: a plan connection replayed as a pool.

`pooled` turns a plan connection of the world into `N` connections, `ID-1` to `ID-N`, with
the same provider, models and config, each with its own allowance. The accounts were bought
on different days, so their windows are staggered: account k's instances of a window of
length L start `(k - 1) * L / N` after account 1's. The 7-day windows of three accounts
reset two days and eight hours apart, their 5-hour windows 1 h 40 min apart.

A staggered window runs on a fixed grid from its account's purchase (`origin`, by default
the trace's first request, plus the account's offset), whatever its alignment was: a
`first_use` window cannot be staggered, since it starts wherever the first request falls.
A `midnight` window stays where the provider puts it, the same for every account.

Together the accounts form a pool in the routing core's sense: connections of one plan
serving a model on the subscription rung, which `ladder.pool_strategy` orders.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Final

from rungway.whatif.outcome import World
from rungway.whatif.plans import PlanError, PlanQuota, PlanWindow

__all__ = ["MAX_ACCOUNTS", "account_ids", "pooled", "staggered"]

MAX_ACCOUNTS: Final = 64
"""The most accounts one plan connection may be replayed as."""


def account_ids(connection_id: str, count: int) -> tuple[str, ...]:
    """The ids of `count` accounts of `connection_id`: `ID-1` to `ID-count`."""
    return tuple(f"{connection_id}-{k}" for k in range(1, count + 1))


def staggered(window: PlanWindow, account: int, count: int, origin: float) -> PlanWindow:
    """Account `account`'s (from 0) copy of `window` in a pool of `count` bought at even
    intervals from `origin`."""
    if window.alignment == "midnight":
        return window
    anchor = origin + account * window.length_s / count
    return replace(window, alignment="fixed", anchor=anchor)


def pooled(world: World, accounts: Mapping[str, int], origin: float) -> World:
    """`world` with each plan connection named in `accounts` replaced by that many accounts
    with staggered windows; a PlanError names a connection that cannot be."""
    if not accounts:
        return world
    settings = world.settings
    known = {connection.id for connection in settings.connections}
    plans = dict(world.plans)
    taken = set(known)
    for connection_id, count in accounts.items():
        if connection_id not in plans:
            names = ", ".join(sorted(plans)) or "none"
            raise PlanError(
                f"{connection_id!r} is not a plan connection with simulated quota"
                f" (plan connections: {names})"
            )
        if not 1 <= count <= MAX_ACCOUNTS:
            raise PlanError(
                f"{connection_id}: a pool holds 1 to {MAX_ACCOUNTS} accounts, not {count}"
            )
        clashes = sorted(taken.intersection(account_ids(connection_id, count)))
        if clashes:
            raise PlanError(
                f"{connection_id}: its accounts would be named {clashes[0]!r}, which the config"
                " already uses"
            )
        taken.update(account_ids(connection_id, count))
    connections = []
    for connection in settings.connections:
        size = accounts.get(connection.id)
        if size is None:
            connections.append(connection)
            continue
        quota = plans.pop(connection.id)
        for k, account_id in enumerate(account_ids(connection.id, size)):
            connections.append(connection.model_copy(update={"id": account_id}))
            windows = tuple(staggered(window, k, size, origin) for window in quota.windows)
            plans[account_id] = PlanQuota(account_id, windows)
    return replace(
        world, settings=settings.model_copy(update={"connections": tuple(connections)}), plans=plans
    )
