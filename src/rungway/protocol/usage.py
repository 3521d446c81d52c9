"""What one upstream response used: its token counts, and the cost the upstream named.

Token counts come from the upstream and are checked where they are read: a count is a
whole number from 0 to `MAX_TOKEN_COUNT`. Anything else (a negative, a fraction, a bool, a
string, a number past the bound) is not a count: it reads as 0 and the usage is marked
`invalid`, which the gateway treats as the upstream's failure and bills at the request's
ceiling, so that no upstream number can credit a budget or overflow the ledger.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

MAX_TOKEN_COUNT: Final = 1_000_000_000
"""The largest token count an upstream may report. The largest context windows hold about
ten million tokens, so a real count stays a hundred times below it; five such counts summed
stay far inside SQLite's 64-bit INTEGER, and priced at any real rate (even $1,000 per
million tokens) they cost a finite, printable amount."""
MAX_REPORTED_COST_USD: Final = 1_000_000.0
"""The largest cost an upstream may name for one request (OpenRouter's `usage.cost`):
more than any real request at the bound above, so a figure past it is not a cost."""
INVALID_USAGE: Final = "invalid_usage"
"""The ledger outcome of an answer whose usage was not token counts: served, and billed at
its ceiling."""
_SHOWN_BITS = 128
_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 40


class _Counts(Protocol):
    """The five counts a wire API's usage reader returns (`translate`'s `CanonicalUsage`)."""

    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def cache_read_tokens(self) -> int: ...
    @property
    def cache_write_tokens(self) -> int: ...
    @property
    def reasoning_tokens(self) -> int: ...
    @property
    def invalid(self) -> str | None: ...


@dataclass(slots=True)
class ReportedUsage:
    """Token counts of one response. `input_tokens` excludes cache reads and writes."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None
    """What the upstream itself says the request cost (OpenRouter's `usage.cost`)."""
    invalid: str | None = None
    """The first field the upstream sent that is not a token count (`name: value`), whose
    count reads as 0; None when every count was one."""

    @classmethod
    def of(cls, tokens: _Counts, cost_usd: float | None = None) -> ReportedUsage:
        """The token counts a wire API's usage reader found, with the upstream's own cost."""
        return cls(
            tokens.input_tokens,
            tokens.output_tokens,
            tokens.cache_read_tokens,
            tokens.cache_write_tokens,
            tokens.reasoning_tokens,
            cost_usd,
            tokens.invalid,
        )


class CountReader:
    """Reads an upstream's token counts field by field, noting the first that is not one.

    One reader serves one usage object: `invalid` then says what was wrong, or None.
    Readers call `read` through a local name (`count = reader.read`): a bound method is
    the cheapest call, and a reader runs for every answer.
    """

    __slots__ = ("invalid",)

    def __init__(self, invalid: str | None = None) -> None:
        self.invalid = invalid

    def read(self, fields: Mapping[str, Any], name: str, absent: int = 0) -> int:
        """The count `fields[name]`: `absent` when the field is missing or null, 0 (and
        noted) when it is not a whole number from 0 to `MAX_TOKEN_COUNT`."""
        value = fields.get(name)
        # The common case in one step, without the calls `check` makes.
        if value.__class__ is int and 0 <= value <= MAX_TOKEN_COUNT:
            return value
        return self.check(value, name, absent)

    def check(self, value: object, name: str, absent: int = 0) -> int:
        """`value`, the field `name`, as a count: as `read` reads a field."""
        if value is None:
            return absent
        count = token_count(value)
        if count is None:
            if self.invalid is None:
                self.invalid = f"{name}: {shown(value)}"
            return 0
        return count


def token_count(value: object) -> int | None:
    """`value` as a token count, or None when it is not a whole number in
    0..`MAX_TOKEN_COUNT` (bools, fractions, negatives, strings and non-finite numbers are
    not)."""
    if isinstance(value, bool):  # an `int` to Python, never a count
        return None
    if isinstance(value, int):
        return value if 0 <= value <= MAX_TOKEN_COUNT else None
    # is_integer() is False for NaN and the infinities.
    if isinstance(value, float) and value.is_integer() and 0 <= value <= MAX_TOKEN_COUNT:
        return int(value)
    return None


def reported_cost(value: object) -> float | None:
    """An upstream's own figure for a request's cost in US dollars, or None when it named
    none or named something that is not a cost (negative, non-finite, past the bound)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    # Every comparison with NaN is false, so NaN fails the range test too.
    return float(value) if 0 <= value <= MAX_REPORTED_COST_USD else None


def without_bad_counts(value: Any) -> Any:
    """A copy of an upstream's JSON `value` in which every count field (a name ending in
    `tokens` or `TokenCount`) whose value is not a token count reads 0: what a client gets
    in place of usage the gateway could not read, its other fields as they were sent."""
    if isinstance(value, dict):
        return {
            name: 0 if _counts_tokens(name) and _not_a_count(inner) else without_bad_counts(inner)
            for name, inner in value.items()
        }
    if isinstance(value, list):
        return [without_bad_counts(inner) for inner in value]
    return value


def _counts_tokens(name: str) -> bool:
    return name.endswith(("tokens", "TokenCount", "tokenCount"))


def _not_a_count(value: object) -> bool:
    return value is not None and not isinstance(value, dict | list) and token_count(value) is None


def shown(value: object) -> str:
    """An upstream's value as a ledger message quotes it: short, whatever its size."""
    if isinstance(value, int) and value.bit_length() > _SHOWN_BITS:
        # Past a few thousand digits an int cannot even be turned into text.
        return f"an integer of {value.bit_length()} bits"
    return _SHORT.repr(value)
