"""The quota board's operator switch: disable and enable a connection."""

from __future__ import annotations

from rungway.quota.board import QuotaBoard
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import ConnectionState, QuotaWindow

NOW = 1_790_000_000.0


def test_disabling_shows_in_the_state_and_keeps_the_readings() -> None:
    board = QuotaBoard(LadderSettings())
    board.observe("plan", [QuotaWindow("5h", 10.0, NOW + 60, NOW)], NOW)
    assert board.disable("plan") is True
    assert board.disable("plan") is False, "already disabled"
    state = board.connection_states(NOW)["plan"]
    assert state.disabled
    assert [window.name for window in state.windows] == ["5h"]
    assert board.enable("plan") is True
    assert board.enable("plan") is False, "already enabled"
    assert not board.connection_states(NOW)["plan"].disabled


def test_a_connection_without_readings_gets_a_state_only_while_disabled() -> None:
    board = QuotaBoard(LadderSettings())
    board.disable("cheap")
    assert board.connection_states(NOW)["cheap"] == ConnectionState(disabled=True)
    board.enable("cheap")
    assert "cheap" not in board.connection_states(NOW)
