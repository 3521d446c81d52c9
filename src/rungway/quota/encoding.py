"""How a `SavedConnection` is written down: one JSON document, the same for every store.

The embedded store keeps the document as one row; the Redis store splits it into parts
(windows, cooldown, breaker, overage, disabled) so replicas can merge them one by one.
Both read it back through `saved_from_document`, which raises on a document it cannot
read, so each store decides what a damaged entry costs.
"""

from __future__ import annotations

from typing import Any

import orjson

from rungway.quota.store import SavedConnection
from rungway.routing.snapshot import BreakerState, ConnectionState, QuotaWindow, WindowStatus

UNREADABLE: tuple[type[Exception], ...] = (
    orjson.JSONDecodeError,
    KeyError,
    TypeError,
    ValueError,
)
"""What reading a damaged or foreign document raises."""


def saved_document(saved: SavedConnection) -> dict[str, Any]:
    """The JSON-ready document of one connection's saved state."""
    state = saved.state
    return {
        "windows": [
            {
                "name": window.name,
                "used_percent": window.used_percent,
                "resets_at": window.resets_at,
                "checked_at": window.checked_at,
                "model": window.model,
                "status": window.status.value,
                "source": window.source,
                "was_exhausted": window.was_exhausted,
            }
            for window in state.windows
        ],
        "cooldown_until": state.cooldown_until,
        "cooldown_reason": state.cooldown_reason,
        "overage_permitted": state.overage_permitted,
        "overage_in_use": state.overage_in_use,
        "disabled": state.disabled,
        "breaker_failures": saved.breaker_failures,
        "breaker_opened_at": saved.breaker_opened_at,
    }


def encode_saved(saved: SavedConnection) -> bytes:
    """The document of `saved` as JSON bytes."""
    return orjson.dumps(saved_document(saved))


def decode_saved(blob: bytes | str) -> SavedConnection:
    """The state `encode_saved` wrote; raises one of `UNREADABLE` when it cannot."""
    data = orjson.loads(blob)
    if not isinstance(data, dict):
        raise TypeError(f"a saved state is a JSON object, not {type(data).__name__}")
    return saved_from_document(data)


def saved_from_document(data: dict[str, Any]) -> SavedConnection:
    """The state a document describes; raises one of `UNREADABLE` when it cannot."""
    windows = tuple(
        QuotaWindow(
            name=str(window["name"]),
            used_percent=_number(window["used_percent"]),
            resets_at=_number(window["resets_at"]),
            checked_at=float(window["checked_at"]),
            model=None if window["model"] is None else str(window["model"]),
            status=WindowStatus(window["status"]),
            source=str(window["source"]),
            was_exhausted=bool(window["was_exhausted"]),
        )
        for window in data["windows"]
    )
    opened_at = _number(data["breaker_opened_at"])
    overage = data["overage_permitted"]
    state = ConnectionState(
        windows=windows,
        cooldown_until=_number(data["cooldown_until"]),
        cooldown_reason=str(data["cooldown_reason"]),
        # The board works out open, half-open or closed from the opening instant.
        breaker=BreakerState.CLOSED,
        overage_permitted=None if overage is None else bool(overage),
        overage_in_use=bool(data["overage_in_use"]),
        disabled=bool(data["disabled"]),
    )
    return SavedConnection(state, int(data["breaker_failures"]), opened_at)


def _number(value: Any) -> float | None:
    return None if value is None else float(value)
