"""`rungway connections import`: stores the login encrypted and prints the config to use it,
never the secret."""

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
        "connections": [
            {"id": "local", "provider": "ollama", "auth": "none", "models": ["llama3"]}
        ],
    }
    path.write_text(yaml.safe_dump(document))
    return path


def test_a_claude_login_is_stored_and_the_snippet_printed(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = Fernet.generate_key()
    monkeypatch.setenv(KEY_ENV, key.decode())
    result = CliRunner().invoke(
        app,
        [
            "connections",
            "import",
            "claude",
            "--from",
            str(FIXTURES / "claude.credentials.json"),
            "--name",
            "claude-max",
            "--config",
            str(config),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "credential: {store: claude-max}" in result.output
    assert "provider: anthropic" in result.output
    assert "fixture-access" not in result.output
    assert "fixture-refresh" not in result.output
    stored = CredentialStore(tmp_path / "store.enc", key).get("claude-max")
    assert stored.refresh_token == "sk-ant-ort01-fixture-refresh-0123456789"


def test_a_gemini_cli_login_is_stored_for_a_code_assist_connection(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = Fernet.generate_key()
    monkeypatch.setenv(KEY_ENV, key.decode())
    source = str(FIXTURES / "gemini.oauth_creds.json")
    result = CliRunner().invoke(
        app,
        ["connections", "import", "gemini", "--from", source, "--name", "g", "-c", str(config)],
    )
    assert result.exit_code == 0, result.output
    assert "provider: gemini-code-assist" in result.output
    assert "renews itself" in result.output
    assert "fixture-access" not in result.output
    stored = CredentialStore(tmp_path / "store.enc", key).get("g")
    assert stored.kind == "gemini"
    assert stored.refresh_token == "1//0g-fixture-refresh"
    assert stored.expires_at == 1790003600.0


def test_the_key_file_is_made_on_first_import_when_no_key_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    path = tmp_path / "rungway.yaml"
    key_file = tmp_path / "store.key"
    document = {
        "credentials": {"path": str(tmp_path / "store.enc"), "key": {"file": str(key_file)}},
        "connections": [{"id": "l", "provider": "ollama", "auth": "none", "models": ["m"]}],
    }
    path.write_text(yaml.safe_dump(document))
    source = str(FIXTURES / "copilot.apps.json")
    result = CliRunner().invoke(
        app,
        ["connections", "import", "copilot", "--from", source, "--name", "seat", "-c", str(path)],
    )
    assert result.exit_code == 0, result.output
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    stored = CredentialStore(tmp_path / "store.enc", key_file.read_bytes().strip()).get("seat")
    assert stored.access_token == "gho_fixture0123456789abcdef"
    assert "gho_fixture" not in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["cursor", "--name", "x"], "unknown login kind 'cursor'"),
        (["claude", "--name", "bad name"], "--name 'bad name'"),
        (["claude", "--name", "x", "--from", "/nonexistent.json"], "cannot read"),
    ],
)
def test_bad_input_is_refused_and_stores_nothing(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.setenv(KEY_ENV, Fernet.generate_key().decode())
    result = CliRunner().invoke(app, ["connections", "import", *args, "--config", str(config)])
    assert result.exit_code != 0
    assert message in result.output
    assert not (tmp_path / "store.enc").exists()
