"""The merge rule of the shared quota state: part by part, the last change wins."""

from __future__ import annotations

import pytest

from rungway.cluster.merge import (
    DEFAULT_PARTS,
    Part,
    decode_record,
    encode_record,
    joined,
    merged,
    split,
)
from rungway.quota.encoding import UNREADABLE
from rungway.quota.store import SavedConnection
from rungway.routing.snapshot import ConnectionState, QuotaWindow, WindowStatus

NOW = 1_790_000_000.123456
SAVED = SavedConnection(
    ConnectionState(
        windows=(
            QuotaWindow("5h", 97.5, NOW + 3600.5, NOW, was_exhausted=True),
            QuotaWindow("7d_opus", None, None, NOW, "claude-opus-4", WindowStatus.REJECTED),
        ),
        cooldown_until=NOW + 600,
        cooldown_reason="rate_limited: slow down",
        overage_permitted=False,
        overage_in_use=True,
        disabled=True,
    ),
    breaker_failures=3,
    breaker_opened_at=NOW,
)


def _record(saved: SavedConnection | None, at: float, by: str) -> dict[str, Part]:
    return {name: Part(data, at, by) for name, data in split(saved).items()}


def test_a_record_carries_a_saved_state_exactly() -> None:
    record = _record(SAVED, NOW, "a")
    assert decode_record(encode_record(record)) == record
    assert joined(decode_record(encode_record(record))) == SAVED


def test_a_part_nobody_wrote_reads_as_its_default() -> None:
    record = {"disabled": Part(split(SAVED)["disabled"], NOW, "a")}
    saved = joined(record)
    assert saved.state == ConnectionState(disabled=True)
    assert set(DEFAULT_PARTS) == {"windows", "cooldown", "breaker", "overage", "disabled"}


def test_each_part_comes_from_whichever_record_changed_it_last() -> None:
    disabled = {"disabled": Part(split(SAVED)["disabled"], NOW + 1, "a")}
    reading = {"windows": Part(split(SAVED)["windows"], NOW + 2, "b")}
    older_enable = {"disabled": Part(DEFAULT_PARTS["disabled"], NOW, "b")}
    result = merged(merged(disabled, reading), older_enable)
    state = joined(result).state
    assert state.disabled, "an older enable does not undo a newer disable"
    assert state.windows == SAVED.state.windows
    assert merged(older_enable, disabled) == disabled, "the order of arrival does not matter"


def test_a_tie_in_time_goes_to_one_origin_on_every_process() -> None:
    a = {"disabled": Part(split(SAVED)["disabled"], NOW, "a")}
    b = {"disabled": Part(DEFAULT_PARTS["disabled"], NOW, "b")}
    assert merged(a, b) == merged(b, a) == b


@pytest.mark.parametrize("blob", [b"[]", b"not json", b'{"windows": {"at": "x"}}'])
def test_a_foreign_record_is_refused(blob: bytes) -> None:
    with pytest.raises(UNREADABLE):
        decode_record(blob)
