"""Request ids: sixteen characters, sortable by time, and short prefixes that name one."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from rungway.server.ids import ALPHABET, EPOCH_MS, LENGTH, RequestIds, encode

_MS_IN_34_YEARS = 34 * 365 * 86_400_000
instants = st.integers(EPOCH_MS, EPOCH_MS + _MS_IN_34_YEARS)
noise = st.integers(0, 2**40 - 1)


def test_an_id_is_sixteen_characters_anyone_can_type() -> None:
    ids = RequestIds()
    for request_id in (ids.new() for _ in range(1000)):
        assert re.fullmatch(f"[{ALPHABET}]{{{LENGTH}}}", request_id)


@given(instants, instants, noise, noise)
def test_ids_sort_as_their_instants_do(first: int, second: int, a: int, b: int) -> None:
    if first < second:
        assert encode(first, a) < encode(second, b)


@given(instants, noise)
def test_the_first_eight_characters_are_the_millisecond(instant: int, a: int) -> None:
    assert encode(instant, a)[:8] == encode(instant, 2**40 - 1 - a)[:8]
    assert encode(instant, a)[:8] != encode(instant + 1, a)[:8]


def test_requests_over_a_second_apart_differ_in_the_first_six_characters() -> None:
    # Six characters are 30 of the 40 time bits: a step of 1,024 ms.
    start = 1_796_000_000_000  # 2026-11-29
    prefixes = {encode(start + step * 1025, 0)[:6] for step in range(3600)}
    assert len(prefixes) == 3600


def test_ids_made_in_the_same_millisecond_differ() -> None:
    ids = RequestIds()
    made = [ids.new() for _ in range(100_000)]
    # 40 random bits per millisecond: the ledger's key must not repeat, even when several
    # processes make thousands a second (a repeat would overwrite a row).
    assert len(set(made)) == len(made)
    assert made == sorted(made, key=lambda request_id: request_id[:8])
