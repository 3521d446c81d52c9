"""Fault parsing and the FIFO fault queue."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rungway.sim import (
    DisconnectFault,
    HttpErrorFault,
    StreamErrorFault,
    TimeoutFault,
    parse_faults,
)
from rungway.sim.faults import FaultQueue


def test_parse_faults_accepts_one_or_many_and_discriminates_on_kind() -> None:
    (single,) = parse_faults({"kind": "http_error", "status": 529})
    assert single == HttpErrorFault(status=529)
    many = parse_faults(
        [
            {"kind": "timeout", "delay_s": 2},
            {"kind": "disconnect", "after_events": 3, "times": 2, "model": "m"},
        ]
    )
    assert many == [
        TimeoutFault(delay_s=2),
        DisconnectFault(after_events=3, times=2, model="m"),
    ]


@pytest.mark.parametrize(
    "payload",
    [
        {"kind": "explode"},
        {"kind": "http_error", "status": 200},
        {"kind": "timeout"},
        {"kind": "garbage", "times": 0},
        {"kind": "disconnect", "typo": 1},
    ],
)
def test_parse_faults_rejects_invalid_faults(payload: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        parse_faults(payload)


def test_queue_is_fifo_and_each_fault_fires_its_times() -> None:
    queue = FaultQueue([HttpErrorFault(status=500, times=2)])
    queue.push(TimeoutFault(delay_s=1))
    taken = [queue.take("m", stream=False) for _ in range(4)]
    assert taken == [
        HttpErrorFault(status=500, times=2),
        HttpErrorFault(status=500, times=2),
        TimeoutFault(delay_s=1),
        None,
    ]


def test_unmatched_faults_stay_queued_for_a_later_request() -> None:
    queue = FaultQueue([HttpErrorFault(status=500, model="fable"), StreamErrorFault()])
    assert queue.take("sonnet", stream=False) is None
    assert queue.take("sonnet", stream=True) == StreamErrorFault()
    assert [entry.fault for entry in queue.pending()] == [HttpErrorFault(status=500, model="fable")]
    assert queue.take("fable", stream=False) == HttpErrorFault(status=500, model="fable")
    assert queue.pending() == []


def test_pending_reports_remaining_firings_and_clear_empties() -> None:
    queue = FaultQueue([DisconnectFault(times=3)])
    queue.take("m", stream=True)
    (entry,) = queue.pending()
    assert entry.remaining == 2
    queue.clear()
    assert queue.pending() == []
