"""The embedded state store: SQLite written off the caller's thread, read at open."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from rungway.quota.embedded import SqliteStateStore, open_state_store
from rungway.quota.store import MemoryStateStore, SavedConnection
from rungway.routing.snapshot import ConnectionState, QuotaWindow, WindowStatus

NOW = 1_790_000_000.0
SAVED = SavedConnection(
    ConnectionState(
        windows=(
            QuotaWindow("7d", 97.5, NOW + 3600, NOW, was_exhausted=True),
            QuotaWindow(
                "7d_opus", None, None, NOW, "claude-opus-4", WindowStatus.REJECTED, "usage"
            ),
        ),
        cooldown_until=NOW + 600,
        cooldown_reason="rate_limited: slow down",
        overage_permitted=False,
        overage_in_use=True,
        disabled=True,
    ),
    breaker_failures=5,
    breaker_opened_at=NOW,
)


def test_what_is_saved_is_loaded_again(tmp_path: Path) -> None:
    store = SqliteStateStore(tmp_path / "ledger.sqlite3.state")
    store.save("plan", SAVED)
    store.save("api", SAVED)
    store.save("api", None)
    store.close()
    assert dict(SqliteStateStore(tmp_path / "ledger.sqlite3.state").load()) == {"plan": SAVED}


def test_a_corrupt_file_is_moved_aside_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ledger.sqlite3.state"
    path.write_bytes(b"this is not a database" * 100)
    with caplog.at_level(logging.WARNING, "rungway.quota"):
        store = open_state_store(path, expected=True)
    assert isinstance(store, SqliteStateStore)
    assert store.load() == {}
    assert f"{path} cannot be read" in caplog.text
    assert (tmp_path / "ledger.sqlite3.state.damaged").read_bytes().startswith(b"this is not")
    store.save("plan", SAVED)
    store.close()
    assert dict(SqliteStateStore(path).load()) == {"plan": SAVED}


def test_an_unreadable_row_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state"
    store = SqliteStateStore(path)
    store.save("plan", SAVED)
    store.close()
    db = sqlite3.connect(path)
    with db:
        db.execute("INSERT INTO connections VALUES ('api', '{\"windows\": 3')")
    db.close()
    with caplog.at_level(logging.WARNING, "rungway.quota"):
        loaded = SqliteStateStore(path).load()
    assert dict(loaded) == {"plan": SAVED}
    assert "the state of 'api' is unreadable" in caplog.text


def test_a_missing_file_that_should_be_there_starts_clean_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "rungway.quota"):
        store = open_state_store(tmp_path / "state", expected=True)
    assert store.load() == {}
    assert "is missing" in caplog.text
    store.close()


def test_an_unwritable_place_keeps_the_state_in_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a folder")
    with caplog.at_level(logging.WARNING, "rungway.quota"):
        store = open_state_store(blocker / "state", expected=False)
    assert isinstance(store, MemoryStateStore)
    assert "kept in memory" in caplog.text
