"""Ledger rows SQLite cannot store as they are, made storable and flagged.

Every count and cost is checked before it reaches a row, so this is the last line: a row
the writer cannot insert (an integer past 64 bits, a NaN in a column that takes no NULL, a
string with a lone surrogate, a value of a type SQLite does not know) is written anyway,
each such value replaced by the nearest one it can store, and an attempt named
`ledger_repaired` added to the row saying which values were replaced. A row is never
dropped for what it holds, and the writer thread never stops for it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

import orjson

from rungway.protocol.usage import shown

REPAIRED: Final = "ledger_repaired"
"""The outcome of the attempt that flags a row whose values were made storable."""
_LOWEST, _HIGHEST = -(2**63), 2**63 - 1


def repaired(values: Sequence[Any], columns: Sequence[str]) -> tuple[Any, ...]:
    """`values`, a row in the order of `columns`, with every value SQLite cannot store
    replaced, and its `attempts` JSON extended by one attempt that names them."""
    fixed = [_storable(value) for value in values]
    replaced = [
        f"{name} was {shown(old)}"
        for name, old, new in zip(columns, values, fixed, strict=True)
        if new is not old
    ]
    at = columns.index("attempts")
    try:
        attempts = orjson.loads(fixed[at])
    except (orjson.JSONDecodeError, TypeError):
        replaced.append("attempts could not be read")
        attempts = []
    connection = fixed[columns.index("connection_id")]
    attempts.append(
        {
            "connection_id": connection if isinstance(connection, str) else "",
            "outcome": REPAIRED,
            "status": None,
            "latency_ms": 0.0,
            "detail": "the row could not be stored as it was: " + "; ".join(replaced or ["?"]),
        }
    )
    fixed[at] = orjson.dumps(attempts).decode()
    return tuple(fixed)


def _storable(value: Any) -> Any:
    """`value` itself when SQLite can store it, else the nearest value it can."""
    if value is None or isinstance(value, bytes | bool):
        return value
    if isinstance(value, int):
        return value if _LOWEST <= value <= _HIGHEST else min(max(value, _LOWEST), _HIGHEST)
    if isinstance(value, float):
        # NaN would be stored as NULL, which the money and token columns refuse.
        return value if math.isfinite(value) else 0.0
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return value.encode(errors="replace").decode()
        return value
    return shown(value)
