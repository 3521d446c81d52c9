"""The port the quota board keeps its live state through, so it outlives the process.

The board holds every connection's state in memory and reads only that on the request
path. Each change it makes is handed to a `StateStore` as one `SavedConnection`, and the
board is filled from `StateStore.load` once, at start-up. An implementation writes off
the request path: `save` may do no more than put the change on a queue. The embedded
SQLite store batches from a writer thread; a shared store (Redis) would write each change
through from its own task and load the whole set at start the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from rungway.routing.snapshot import ConnectionState


@dataclass(frozen=True, slots=True)
class SavedConnection:
    """One connection's state as a store keeps it: what the ladder reads, plus the breaker's
    own count and opening instant, from which its open, half-open or closed state follows."""

    state: ConnectionState
    breaker_failures: int = 0
    breaker_opened_at: float | None = None


class StateStore(Protocol):
    """Where the board's live state is kept between runs."""

    def load(self) -> Mapping[str, SavedConnection]:
        """Every connection's last saved state (read once, at start-up)."""
        ...

    def save(self, connection_id: str, saved: SavedConnection | None) -> None:
        """Keep `saved` as the connection's state, or forget it when None; never blocks."""
        ...

    def close(self) -> None:
        """Write what is pending and let go of the store."""
        ...


class MemoryStateStore:
    """Keeps the saved states in a dictionary: a board built again on the same store
    starts where the last one stopped, as a restarted gateway would."""

    def __init__(self) -> None:
        self.saved: dict[str, SavedConnection] = {}

    def load(self) -> Mapping[str, SavedConnection]:
        """A copy of what is saved."""
        return dict(self.saved)

    def save(self, connection_id: str, saved: SavedConnection | None) -> None:
        """Keep or forget one connection's state."""
        if saved is None:
            self.saved.pop(connection_id, None)
        else:
            self.saved[connection_id] = saved

    def close(self) -> None:
        """Nothing to write."""
