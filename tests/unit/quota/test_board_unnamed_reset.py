"""A refusal that names no reset keeps the reset the last reading of its window gave."""

from __future__ import annotations

from rungway.quota.board import QuotaBoard
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import QuotaWindow, WindowStatus

NOW = 1_790_000_000.0


def _spent(resets_at: float | None, at: float) -> QuotaWindow:
    return QuotaWindow("7d", 100.0, resets_at, at, status=WindowStatus.REJECTED, source="error")


def _reset_of(board: QuotaBoard, at: float) -> float | None:
    (window,) = board.connection_states(at)["plan"].windows
    return window.resets_at


def test_a_refusal_without_a_reset_keeps_the_polled_one() -> None:
    board = QuotaBoard(LadderSettings())
    board.observe("plan", [QuotaWindow("7d", 90.0, NOW + 3600, NOW, source="poll")], NOW)
    board.observe("plan", [_spent(None, NOW + 10)], NOW + 10)
    assert _reset_of(board, NOW + 10) == NOW + 3600
    assert board.connection_states(NOW + 10)["plan"].windows[0].status is WindowStatus.REJECTED


def test_a_reset_already_past_or_a_named_one_is_not_carried_over() -> None:
    board = QuotaBoard(LadderSettings())
    board.observe("plan", [QuotaWindow("7d", 90.0, NOW + 5, NOW, source="poll")], NOW)
    board.observe("plan", [_spent(None, NOW + 10)], NOW + 10)
    assert _reset_of(board, NOW + 10) is None
    board.observe("plan", [_spent(NOW + 99, NOW + 11)], NOW + 11)
    assert _reset_of(board, NOW + 11) == NOW + 99
