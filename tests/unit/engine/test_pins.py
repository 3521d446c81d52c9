"""The in-memory pin store: a pin lasts its TTL from each turn, moves are counted, and
the store keeps at most its cap, the least recently used going first."""

from __future__ import annotations

import asyncio

import pytest

from rungway.engine.pins import MemoryPins
from rungway.protocol.sessions import response_key

TTL = 100.0


def test_a_pin_lasts_its_ttl_from_its_last_turn() -> None:
    pins = MemoryPins(TTL)
    pins.pin("s", "plan-a", 0.0)
    assert pins.pinned("s", 99.0) == "plan-a"
    pins.pin("s", "plan-a", 99.0)  # a turn renews it
    assert pins.pinned("s", 198.0) == "plan-a"
    assert pins.pinned("s", 199.0) is None
    assert pins.pinned("other", 0.0) is None
    assert pins.moves == 0


def test_a_changed_pin_is_one_move_and_an_expired_one_is_none() -> None:
    pins = MemoryPins(TTL)
    assert pins.pin("s", "plan-a", 0.0) is None
    assert pins.pin("s", "plan-b", 10.0) == "plan-a"
    assert pins.pin("s", "plan-b", 20.0) == "plan-b"
    assert pins.moves == 1
    # Long after its last turn the session starts afresh: no move.
    assert pins.pin("s", "plan-a", 500.0) is None
    assert pins.moves == 1
    assert pins.pinned("s", 501.0) == "plan-a"


def test_the_store_keeps_at_most_its_cap_dropping_the_least_recently_used() -> None:
    pins = MemoryPins(TTL, max_pins=3)
    for number, key in enumerate("abc"):
        pins.pin(key, "plan-a", float(number))
    pins.pin("a", "plan-a", 3.0)  # "a" is used again: "b" is now the oldest
    pins.pin("d", "plan-b", 4.0)
    assert len(pins) == 3
    assert pins.pinned("b", 5.0) is None
    assert [pins.pinned(key, 5.0) for key in "acd"] == ["plan-a", "plan-a", "plan-b"]
    for number in range(10_000):
        pins.pin(f"s{number}", "plan-a", 6.0)
    assert len(pins) == 3


def test_counts_are_of_live_sessions_per_connection_without_chain_links() -> None:
    pins = MemoryPins(TTL)
    pins.pin("s1", "plan-a", 0.0)
    pins.pin("s2", "plan-a", 50.0)
    pins.pin("s3", "plan-b", 50.0)
    chained = response_key("resp_1")
    assert chained is not None
    pins.pin(chained, "plan-b", 50.0)
    assert pins.pinned_counts(60.0) == {"plan-a": 2, "plan-b": 1}
    assert pins.pinned_counts(120.0) == {"plan-a": 1, "plan-b": 1}
    # Without an instant, the last turn pinned stands for now.
    assert pins.pinned_counts() == {"plan-a": 2, "plan-b": 1}


def test_adopting_or_following_another_process_s_pin_is_no_move() -> None:
    pins = MemoryPins(TTL)
    pins.adopt("s", "plan-b", 0.0, shared=True)
    assert pins.pinned("s", 1.0) == "plan-b"
    pins.follow("s", "plan-c")
    pins.follow("unknown", "plan-c")
    assert pins.pinned("s", 1.0) == "plan-c"
    assert pins.pinned("unknown", 1.0) is None
    assert pins.moves == 0


def test_a_shared_copy_is_renewed_once_a_quarter_ttl_has_passed() -> None:
    pins = MemoryPins(TTL)
    pins.pin("s", "plan-a", 0.0)
    assert pins.stale_share("s", 0.0), "a new pin is written"
    assert not pins.stale_share("s", 10.0)
    assert pins.stale_share("s", 26.0)
    assert not pins.stale_share("s", 30.0)
    assert not pins.stale_share("unknown", 30.0)


def test_one_process_s_pins_have_nothing_more_to_recall() -> None:
    pins = MemoryPins(TTL)
    assert asyncio.run(pins.recall("s", 0.0)) is None
    assert not pins.shared


@pytest.mark.parametrize(("ttl", "cap"), [(0.0, 10), (-1.0, 10), (10.0, 0)])
def test_a_store_needs_a_ttl_and_room(ttl: float, cap: int) -> None:
    with pytest.raises(ValueError, match="TTL"):
        MemoryPins(ttl, max_pins=cap)
