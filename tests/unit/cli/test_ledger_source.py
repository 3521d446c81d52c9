"""Where a command reads the ledger: a PostgreSQL DSN that cannot be read is one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from rungway.cli.ledger_source import postgres_reader
from rungway.config import Settings, parse_settings


def _settings(credentials: dict[str, object]) -> Settings:
    return parse_settings(
        {
            "credentials": credentials,
            "ledger": {"postgres": {"dsn": {"store": "ledger-dsn"}}},
            "connections": [
                {"id": "k", "provider": "openai", "auth": "none", "models": ["m"]},
            ],
        }
    )


def test_a_store_without_its_key_is_one_line_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("RUNGWAY_TEST_NO_SUCH_KEY", raising=False)
    settings = _settings(
        {"path": str(tmp_path / "store"), "key": {"env": "RUNGWAY_TEST_NO_SUCH_KEY"}},
    )
    with pytest.raises(typer.Exit) as exited:
        postgres_reader(settings)
    assert exited.value.exit_code == 2
    said = capsys.readouterr().err
    assert said.startswith("ledger.postgres.dsn: ")
    assert "RUNGWAY_TEST_NO_SUCH_KEY" in said
