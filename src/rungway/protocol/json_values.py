"""Typed reads of values from parsed JSON of any shape: the expected type, or a default.

Bodies from clients and upstreams are parsed before anyone knows their shape; a field of
the wrong type reads as absent rather than raising. (`bool` is an `int` in Python, so the
integer and number reads leave booleans out.)
"""

from __future__ import annotations

from typing import Any


def whole(value: object) -> int | None:
    """`value` when it is an integer, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def count(value: object, default: int = 0) -> int:
    """`value` when it is an integer, else `default`."""
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def number(value: object) -> float | None:
    """`value` as a float when it is an integer or a float, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def flag(value: object) -> bool | None:
    """`value` when it is a boolean, else None."""
    return value if isinstance(value, bool) else None


def text(value: object) -> str | None:
    """`value` when it is a string, else None."""
    return value if isinstance(value, str) else None


def mapping(value: object) -> dict[str, Any]:
    """`value` when it is an object, else an empty one."""
    return value if isinstance(value, dict) else {}


def array(value: object) -> list[Any]:
    """`value` when it is an array, else an empty one."""
    return value if isinstance(value, list) else []
