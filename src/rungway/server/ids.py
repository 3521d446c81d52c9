"""Request ids: short, random after a time prefix, sortable by when they were made.

An id is 16 characters of lowercase Crockford base32 (digits and letters but i, l, o and
u): 8 for the milliseconds since 2025-01-01 UTC, then 8 random (40 bits). Ids sort as
their times do, and since requests rarely share a millisecond, the first 8 characters
name one request; at a few requests a second, the first 6 (the 1.024 s it began in)
usually do. The random part is wide because an id is the ledger's key across every
replica of a cluster: at thousands of requests a second spread over several processes,
20 bits would repeat within minutes (and a repeated id would overwrite a row), 40 bits
not in years.
"""

from __future__ import annotations

import random
import time

EPOCH_MS = 1_735_689_600_000
"""2025-01-01T00:00:00Z: 40 bits of milliseconds from here last until 2059."""
ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
"""In the order of the values, so ids compare as their times do."""
LENGTH = 16

# Every 10-bit value as its two characters: eight lookups make an id.
_PAIRS = tuple(high + low for high in ALPHABET for low in ALPHABET)


class RequestIds:
    """Hands out request ids.

    The random part comes from the `random` module, seeded from the kernel once per
    process (and again in a forked child), so no id costs a system call: ids need to be
    distinct, not unguessable.
    """

    def __init__(self) -> None:
        self._random = random.Random()

    def new(self) -> str:
        """The next id, such as `1re85hc3h2mr4k7w`."""
        return encode(time.time_ns() // 1_000_000, self._random.getrandbits(40))


def encode(epoch_ms: int, noise: int) -> str:
    """The id of the instant `epoch_ms` with 40 bits of `noise`."""
    value = ((epoch_ms - EPOCH_MS) & (2**40 - 1)) << 40 | noise & (2**40 - 1)
    pairs = _PAIRS
    return (
        pairs[value >> 70]
        + pairs[value >> 60 & 1023]
        + pairs[value >> 50 & 1023]
        + pairs[value >> 40 & 1023]
        + pairs[value >> 30 & 1023]
        + pairs[value >> 20 & 1023]
        + pairs[value >> 10 & 1023]
        + pairs[value & 1023]
    )
