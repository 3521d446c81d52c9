"""The live quota, cooldown, breaker and disabled state of every connection.

The engine reports what each upstream response said (its quota windows, its failure or
success); the ladder reads a `ConnectionState` per connection. A window keeps the memory
of having been exhausted until a reading shows it back above the re-entry level: that
memory, and nothing else, is how the ladder avoids flapping at the cut-off.

Every change is also handed to a `StateStore`, and a board starts from what its store
kept: an operator's disable, a cooldown, an open breaker and a window's exhaustion memory
outlive a restart.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from rungway.protocol.failures import Failure, FailureClass
from rungway.quota.breaker import TRIPPING, Breaker, BreakerPolicy
from rungway.quota.burn import BurnBook
from rungway.quota.cooldown import CooldownPolicy, cooldown_until
from rungway.quota.limits import limit_kind
from rungway.quota.store import SavedConnection, StateStore
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import (
    BreakerState,
    ConnectionState,
    QuotaWindow,
    WindowStatus,
)

_WindowKey = tuple[str, str | None]


@dataclass(slots=True)
class _Rest:
    until: float
    reason: str


class QuotaBoard:
    """Every connection's windows, cooldown, breaker and disabling; the ladder's source of state."""

    def __init__(
        self,
        settings: LadderSettings,
        cooldowns: CooldownPolicy | None = None,
        breakers: BreakerPolicy | None = None,
        store: StateStore | None = None,
    ) -> None:
        self._settings = settings
        self._cooldowns = cooldowns or CooldownPolicy()
        self._breakers = breakers or BreakerPolicy()
        self._store = store
        self._windows: dict[str, dict[_WindowKey, QuotaWindow]] = {}
        self._rests: dict[str, _Rest] = {}
        self._levels: dict[str, int] = {}
        self._breaker: dict[str, Breaker] = {}
        self._states: dict[str, ConnectionState] = {}
        self._overage: dict[str, bool] = {}
        self._overage_in_use: set[str] = set()
        self._disabled: set[str] = set()
        self._now = 0.0
        self.burn = BurnBook()
        """Each window's recent readings, for its burn rate (the admin API's pools)."""

    def restore(
        self, saved: Mapping[str, SavedConnection], now: float, known: Collection[str]
    ) -> None:
        """Take up the state a store kept for the connections in `known`, less what has
        expired by `now`; the store forgets the rest."""
        self._now = now
        for connection_id, kept in saved.items():
            if connection_id not in known:
                if self._store is not None:
                    self._store.save(connection_id, None)
                continue
            self._take(connection_id, kept, now)

    def adopt(self, connection_id: str, saved: SavedConnection, now: float) -> None:
        """Take up the state another process of the cluster saved for the connection, in
        place of this board's, without handing it back to the store."""
        self._windows.pop(connection_id, None)
        self._rests.pop(connection_id, None)
        self._breaker.pop(connection_id, None)
        self._overage.pop(connection_id, None)
        self._overage_in_use.discard(connection_id)
        self._disabled.discard(connection_id)
        self._now = max(self._now, now)
        for window in saved.state.windows:
            self.burn.record(connection_id, window, window.checked_at)
        self._take(connection_id, saved, now, save=False)

    def connection_states(self, now: float) -> Mapping[str, ConnectionState]:
        """A read-only view of the states at `now` (each state itself is immutable)."""
        self.tick(now)
        return MappingProxyType(self._states)

    def tick(self, now: float) -> None:
        """Bring time-dependent state (breakers turning half-open) up to `now`."""
        self._now = now
        for connection_id, breaker in self._breaker.items():
            if breaker.opened_at is not None:
                state = self._states.get(connection_id)
                if state is None or state.breaker is not breaker.state(now, self._breakers):
                    self._rebuild(connection_id)

    def observe(self, connection_id: str, windows: Iterable[QuotaWindow], now: float) -> None:
        """Record the windows one response reported, keeping each window's exhaustion memory."""
        known = self._windows.setdefault(connection_id, {})
        changed = False
        for seen in windows:
            key = (seen.name, seen.model)
            previous = known.get(key)
            reading = _timed_by(seen, previous, now)
            self.burn.record(connection_id, reading, now)
            remembered = self._remembers(reading, previous, now)
            known[key] = (
                reading
                if remembered == reading.was_exhausted
                else replace(reading, was_exhausted=remembered)
            )
            changed = True
        if changed:
            self._now = now
            self._rebuild(connection_id)

    def observe_overage(
        self, connection_id: str, permitted: bool, in_use: bool | None = None
    ) -> None:
        """Record whether the account bills use past its allowance (its usage endpoint or a
        response says), and, when a response says, whether that response was billed so."""
        changed = self._overage.get(connection_id) is not permitted
        self._overage[connection_id] = permitted
        if in_use is not None and (connection_id in self._overage_in_use) is not in_use:
            changed = True
            if in_use:
                self._overage_in_use.add(connection_id)
            else:
                self._overage_in_use.discard(connection_id)
        if changed:
            self._rebuild(connection_id)

    def failed(self, connection_id: str, failure: Failure, now: float) -> None:
        """Rest the connection after `failure`, and count it against the breaker."""
        self._now = now
        if failure.kind is FailureClass.QUOTA_EXHAUSTED and self._only_models_exhausted(
            connection_id, now
        ):
            # A per-model window (a weekly limit on one model) gates that model by itself;
            # resting the whole connection would bench every other model of the plan.
            return
        level = self._levels.get(connection_id, 0)
        until = cooldown_until(
            failure.kind,
            level=level,
            now=now,
            retry_after_s=failure.retry_after_s,
            resets_at=self._binding_reset(connection_id, now),
            policy=self._cooldowns,
        )
        if until is not None:
            current = self._rests.get(connection_id)
            if (
                current is None
                or current.until <= now
                or failure.kind is FailureClass.QUOTA_EXHAUSTED
                or until > current.until
            ):
                # Long enough to keep the fix a failure names: a named model whose every
                # connection rests is answered with this reason alone. The limit kind
                # (`rate_limited (throttle): ...`) tells a minute's throttle from a spent
                # window or budget wherever the reason is shown.
                limit = limit_kind(failure)
                kind = failure.kind if limit is None else f"{failure.kind} ({limit})"
                reason = f"{kind}: {failure.message[:300]}"
                self._rests[connection_id] = _Rest(until, reason)
            self._levels[connection_id] = level + 1
        if failure.kind in TRIPPING:
            self._breaker.setdefault(connection_id, Breaker()).failed(now, self._breakers)
        self._rebuild(connection_id)

    def succeeded(self, connection_id: str) -> None:
        """A good answer: the backoff starts over and the breaker closes."""
        if connection_id in self._levels:
            del self._levels[connection_id]
        breaker = self._breaker.get(connection_id)
        if breaker is not None and (breaker.failures or breaker.opened_at is not None):
            breaker.succeeded()
            self._rebuild(connection_id)

    def clear_cooldown(self, connection_id: str) -> bool:
        """End the connection's cooldown now (an operator's call); True if it had one."""
        had = self._rests.pop(connection_id, None) is not None
        self._levels.pop(connection_id, None)
        if had:
            self._rebuild(connection_id)
        return had

    def disable(self, connection_id: str) -> bool:
        """Take the connection out of every plan (an operator's call); True if it was in."""
        if connection_id in self._disabled:
            return False
        self._disabled.add(connection_id)
        self._rebuild(connection_id)
        return True

    def enable(self, connection_id: str) -> bool:
        """Put a disabled connection back into the plans; True if it was disabled."""
        if connection_id not in self._disabled:
            return False
        self._disabled.discard(connection_id)
        self._rebuild(connection_id)
        return True

    def _take(
        self, connection_id: str, kept: SavedConnection, now: float, *, save: bool = True
    ) -> None:
        state = kept.state
        windows = {
            (window.name, window.model): window
            for window in state.windows
            if self._still_tells(window, now)
        }
        if windows:
            self._windows[connection_id] = windows
        if state.cooldown_until is not None and state.cooldown_until > now:
            self._rests[connection_id] = _Rest(state.cooldown_until, state.cooldown_reason)
        if kept.breaker_failures or kept.breaker_opened_at is not None:
            self._breaker[connection_id] = Breaker(kept.breaker_failures, kept.breaker_opened_at)
        if state.overage_permitted is not None:
            self._overage[connection_id] = state.overage_permitted
        if state.overage_in_use:
            self._overage_in_use.add(connection_id)
        if state.disabled:
            self._disabled.add(connection_id)
        self._rebuild(connection_id, save=save)

    def _remembers(self, window: QuotaWindow, previous: QuotaWindow | None, now: float) -> bool:
        exit_at = self._settings.exit_cutoff_percent
        if window.status is WindowStatus.REJECTED:
            return True
        if window.used_percent is None:
            return previous.was_exhausted if previous is not None else False
        remaining = 100.0 - window.used_percent
        if remaining <= exit_at:
            return True
        if remaining > self._settings.reentry_min_remaining_percent:
            return False
        # Inside the band: keep what the window was, unless that was another window period.
        if previous is None or (previous.resets_at is not None and previous.resets_at <= now):
            return False
        return previous.was_exhausted

    def _still_tells(self, window: QuotaWindow, now: float) -> bool:
        # A window whose reset has passed says nothing of the new period, and an old
        # reading without a reset instant is stale unless it remembers an exhaustion.
        if window.resets_at is not None:
            return window.resets_at > now
        return window.was_exhausted or now - window.checked_at <= self._settings.max_state_age_s

    def _only_models_exhausted(self, connection_id: str, now: float) -> bool:
        exhausted = [
            window
            for window in self._windows.get(connection_id, {}).values()
            if window.was_exhausted and (window.resets_at is None or window.resets_at > now)
        ]
        return bool(exhausted) and all(window.model is not None for window in exhausted)

    def _binding_reset(self, connection_id: str, now: float) -> float | None:
        # The connection is usable again when its last exhausted window resets.
        resets = [
            window.resets_at
            for window in self._windows.get(connection_id, {}).values()
            if window.was_exhausted and window.resets_at is not None and window.resets_at > now
        ]
        return max(resets) if resets else None

    def _rebuild(self, connection_id: str, *, save: bool = True) -> None:
        windows = tuple(self._windows.get(connection_id, {}).values())
        rest = self._rests.get(connection_id)
        breaker = self._breaker.get(connection_id)
        tripped = breaker.state(self._now, self._breakers) if breaker else BreakerState.CLOSED
        state = ConnectionState(
            windows=windows,
            cooldown_until=rest.until if rest is not None else None,
            cooldown_reason=rest.reason if rest is not None else "",
            breaker=tripped,
            breaker_open_until=(
                breaker.opened_at + self._breakers.half_open_after_s
                if breaker is not None
                and breaker.opened_at is not None
                and tripped is BreakerState.OPEN
                else None
            ),
            overage_permitted=self._overage.get(connection_id),
            overage_in_use=connection_id in self._overage_in_use,
            disabled=connection_id in self._disabled,
        )
        if state == ConnectionState():
            self._states.pop(connection_id, None)
        else:
            self._states[connection_id] = state
        if self._store is not None and save:
            # One object and a queue put: the store encodes and writes it off this thread.
            failures = breaker.failures if breaker is not None else 0
            opened_at = breaker.opened_at if breaker is not None else None
            self._store.save(
                connection_id,
                None
                if connection_id not in self._states and not failures
                else SavedConnection(state, failures, opened_at),
            )


def _timed_by(seen: QuotaWindow, previous: QuotaWindow | None, now: float) -> QuotaWindow:
    # A refusal that names no reset (Kimi's spent-plan 403) is the same window the last
    # reading timed, while that reading's reset is still ahead.
    if seen.resets_at is not None or previous is None or previous.resets_at is None:
        return seen
    return replace(seen, resets_at=previous.resets_at) if previous.resets_at > now else seen
