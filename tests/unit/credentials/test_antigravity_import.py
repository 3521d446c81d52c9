"""`rungway connections import antigravity`: the agy CLI's login stored for an Antigravity
connection, and a Gemini CLI import told where Google's consumer plans went."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from cryptography.fernet import Fernet
from typer.testing import CliRunner

from rungway.cli.main import app
from rungway.credentials.store import KEY_ENV, CredentialStore

FIXTURES = Path(__file__).parents[2] / "fixtures" / "credentials"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "rungway.yaml"
    document = {
        "credentials": {"path": str(tmp_path / "store.enc")},
        "connections": [{"id": "local", "provider": "ollama", "auth": "none", "models": ["m"]}],
    }
    path.write_text(yaml.safe_dump(document))
    return path


def test_an_agy_login_is_stored_for_an_antigravity_connection(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = Fernet.generate_key()
    monkeypatch.setenv(KEY_ENV, key.decode())
    source = str(FIXTURES / "antigravity-oauth-token")
    result = CliRunner().invoke(
        app,
        [
            "connections",
            "import",
            "antigravity",
            "--from",
            source,
            "--name",
            "ag",
            "-c",
            str(config),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "provider: antigravity" in result.output
    assert "renews itself" in result.output
    assert "fixture-agy" not in result.output
    stored = CredentialStore(tmp_path / "store.enc", key).get("ag")
    assert stored.kind == "antigravity"
    assert stored.refresh_token == "1//0g-fixture-agy-refresh"
    assert stored.expires_at == 1789982400.0


def test_a_gemini_cli_import_points_to_the_antigravity_import(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, Fernet.generate_key().decode())
    source = str(FIXTURES / "gemini.oauth_creds.json")
    result = CliRunner().invoke(
        app,
        ["connections", "import", "gemini", "--from", source, "--name", "g", "-c", str(config)],
    )
    assert result.exit_code == 0, result.output
    assert "2026-06-18" in result.output
    assert "rungway connections import antigravity" in result.output


def test_a_missing_agy_file_says_how_else_to_import_the_login(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, Fernet.generate_key().decode())
    monkeypatch.setenv("AGY_TOKEN_FILE", str(tmp_path / "absent"))
    result = CliRunner().invoke(
        app, ["connections", "import", "antigravity", "--name", "ag", "-c", str(config)]
    )
    assert result.exit_code == 1
    assert "absent" in result.output
    assert "--from FILE" in result.output
