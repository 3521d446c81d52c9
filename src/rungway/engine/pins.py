"""Session pins: which connection each conversation is kept on (session affinity).

The planner asks a `PinStore` for a request's pin and hands it to the ladder
(`RouteRequest.pinned`), which puts that connection first within its pool while it is
usable. Once a request has been served, the engine pins its session to the connection that
served it: the same one (the pin's life starts again), or another one, when the pinned
account was spent or resting and the ladder chose by its strategy. That is a session move,
counted, and the session stays on the new account from then on, even when the old one
comes back: one move, not back and forth.

`MemoryPins` keeps the pins of one process; `rungway.cluster.pins.RedisPins` shares them
across processes and replicas, with a `MemoryPins` in front.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from typing import Protocol

from rungway.protocol.sessions import RESPONSE_PREFIX

DEFAULT_MAX_PINS = 100_000
"""How many sessions one process remembers at most: the least recently used goes first."""


class PinStore(Protocol):
    """Where session pins are kept."""

    shared: bool
    """Whether `recall` may find a pin this process has not seen (another process's)."""

    @property
    def moves(self) -> int:
        """How many times a session moved from one connection to another."""
        ...

    def pinned(self, key: str, now: float) -> str | None:
        """The connection `key` is pinned to, if this process knows one: one lookup."""
        ...

    async def recall(self, key: str, now: float) -> str | None:
        """The pin of a session this process does not know (another process's), if any."""
        ...

    def pin(self, key: str, connection_id: str, now: float) -> str | None:
        """Keep `key` on `connection_id` for the pins' TTL from `now`; the connection it
        was pinned to before, if any (another one: the session moved)."""
        ...

    def pinned_counts(self, now: float | None = None) -> dict[str, int]:
        """How many live sessions each connection holds."""
        ...


class _Pin:
    """One session's pin."""

    __slots__ = ("connection_id", "expires_at", "shared_at")

    def __init__(self, connection_id: str, expires_at: float) -> None:
        self.connection_id = connection_id
        self.expires_at = expires_at
        self.shared_at = float("-inf")
        """When the shared store last had this pin written (`RedisPins`)."""


class MemoryPins:
    """Session pins in this process's memory: a TTL from each turn, and a size cap."""

    shared = False

    def __init__(self, ttl_s: float, *, max_pins: int = DEFAULT_MAX_PINS) -> None:
        if ttl_s <= 0 or max_pins < 1:
            raise ValueError("a pin store needs a positive TTL and room for one pin")
        self.ttl_s = ttl_s
        self._max = max_pins
        self._pins: OrderedDict[str, _Pin] = OrderedDict()
        self._moves = 0
        self._last_pinned_at = float("-inf")

    @property
    def moves(self) -> int:
        """How many times a session moved from one connection to another."""
        return self._moves

    def __len__(self) -> int:
        return len(self._pins)

    def pinned(self, key: str, now: float) -> str | None:
        """The connection `key` is pinned to, unless its pin has expired."""
        pin = self._pins.get(key)
        if pin is None or pin.expires_at <= now:
            return None
        return pin.connection_id

    async def recall(self, key: str, now: float) -> str | None:
        """Nothing: one process's pins are all in `pinned`."""
        del key, now
        return None

    def pin(self, key: str, connection_id: str, now: float) -> str | None:
        """Keep `key` on `connection_id` for the TTL from `now`; the connection it was
        pinned to before (None for a new or expired pin). A change is a move."""
        self._last_pinned_at = now
        pins = self._pins
        pin = pins.get(key)
        if pin is not None and pin.expires_at > now:
            previous = pin.connection_id
            if previous != connection_id:
                self._moves += 1
                pin.connection_id = connection_id
            pin.expires_at = now + self.ttl_s
            pins.move_to_end(key)
            return previous
        if pin is not None:
            del pins[key]
        pins[key] = _Pin(connection_id, now + self.ttl_s)
        if len(pins) > self._max:
            pins.popitem(last=False)
        return None

    def adopt(self, key: str, connection_id: str, now: float, *, shared: bool) -> None:
        """Take another process's pin of `key` as this one's (no move: this process did
        not serve it elsewhere); `shared` says the shared store holds it as it is."""
        pins = self._pins
        pin = pins.get(key)
        if pin is None:
            pin = pins[key] = _Pin(connection_id, now + self.ttl_s)
            if len(pins) > self._max:
                pins.popitem(last=False)
        else:
            pin.connection_id = connection_id
            pin.expires_at = max(pin.expires_at, now + self.ttl_s)
            pins.move_to_end(key)
        if shared:
            pin.shared_at = now

    def follow(self, key: str, connection_id: str) -> None:
        """Another process moved `key`: follow it, if this process knows the session."""
        pin = self._pins.get(key)
        if pin is not None:
            pin.connection_id = connection_id

    def stale_share(self, key: str, now: float) -> bool:
        """Whether the shared copy of `key`'s pin should be written again: it has lived a
        quarter of its TTL since it was last written (so a live session's shared pin never
        expires, at one write per session per quarter TTL). Marks it written."""
        pin = self._pins.get(key)
        if pin is None or now - pin.shared_at < self.ttl_s / 4:
            return False
        pin.shared_at = now
        return True

    def clear(self) -> None:
        """Forget every pin (the moves counted stay)."""
        self._pins.clear()

    def pinned_counts(self, now: float | None = None) -> dict[str, int]:
        """How many live sessions each connection holds: pins not expired at `now` (by
        default, the last turn pinned, which the admin API's view reads without a clock).

        A Responses reply's pin is a link of its conversation's chain, not a session of
        its own: not counted."""
        if now is None:
            now = self._last_pinned_at
        counts: defaultdict[str, int] = defaultdict(int)
        for key, pin in self._pins.items():
            if pin.expires_at > now and not key.startswith(RESPONSE_PREFIX):
                counts[pin.connection_id] += 1
        return dict(counts)
