"""`rungway init` writes a starter config from the logins, keys and local Ollama it finds:
the file loads, holds no secret, the logins land in the encrypted store, and nothing is
written without a yes or over an existing file."""

from __future__ import annotations

import os
import pty
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from rungway.config import CredentialRef, load_settings
from rungway.credentials.store import KEY_ENV, CredentialStore
from rungway.protocol.auth import Auth
from rungway.sim import SimUpstream, builtin_scenario, load_scenario

FIXTURES = Path(__file__).parents[1] / "fixtures" / "credentials"
STORE_KEY = Fernet.generate_key().decode()
KEYS = {
    "ANTHROPIC_API_KEY": "sk-ant-api03-init-test-secret",
    "DEEPSEEK_API_KEY": "sk-init-test-deepseek-secret",
}
SECRETS = (
    *KEYS.values(),
    "sk-ant-oat01-fixture-access-0123456789",
    "sk-ant-ort01-fixture-refresh-0123456789",
    "rt-fixture-refresh-0123456789",
    "eyJhbGciOiAibm9uZSIsICJ0eXAiOiAiSldUIn0",
    "ya29.a0-fixture-access",
    "1//0g-fixture-refresh",
    "ya29.fixture-agy-access",
    "1//0g-fixture-agy-refresh",
)


@pytest.fixture(scope="module")
def ollama() -> Iterator[str]:
    """A simulated local Ollama on loopback; its URL."""
    sim = SimUpstream(load_scenario(builtin_scenario("local-ollama")))
    url = sim.start()
    yield url
    sim.stop()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home directory with Claude Code, Codex, Antigravity and Gemini CLI logins in their
    places."""
    folder = tmp_path / "home"
    for source, target in (
        ("claude.credentials.json", ".claude/.credentials.json"),
        ("codex.auth.json", ".codex/auth.json"),
        ("gemini.oauth_creds.json", ".gemini/oauth_creds.json"),
        ("antigravity-oauth-token", ".gemini/antigravity-cli/antigravity-oauth-token"),
    ):
        (folder / target).parent.mkdir(parents=True)
        shutil.copy(FIXTURES / source, folder / target)
    return folder


@pytest.fixture
def closed_port() -> Iterator[str]:
    """An `OLLAMA_HOST` where nothing listens: a port held bound but not listening."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{held.getsockname()[1]}"


def _env(home: Path, ollama_host: str, **extra: str) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "COLUMNS": "200",
        KEY_ENV: STORE_KEY,
        "OLLAMA_HOST": ollama_host,
        **extra,
    }


def _init(
    home: Path, env: dict[str, str], *args: str, stdin: int | None = subprocess.DEVNULL
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rungway", "init", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
        cwd=home,
        stdin=stdin,
    )


def _written(home: Path) -> Path:
    # platformdirs' user config directory on Linux, under the HOME given to the command.
    return home / ".config" / "rungway" / "rungway.yaml"


def _store(home: Path) -> Path:
    return home / ".local" / "share" / "rungway" / "credentials.enc"


def test_the_written_config_loads_and_holds_no_secret(home: Path, ollama: str) -> None:
    env = _env(home, ollama.removeprefix("http://"), **KEYS)
    done = _init(home, env, "--yes")
    assert done.returncode == 0, done.stderr
    path = _written(home)
    settings = load_settings(path)
    ids = [connection.id for connection in settings.connections]
    assert ids == [
        "claude-plan",
        "codex-plan",
        "antigravity-plan",
        "ollama",
        "claude-api",
        "deepseek",
    ]
    by_id = {connection.id: connection for connection in settings.connections}
    assert by_id["claude-plan"].auth is Auth.OAUTH
    assert by_id["claude-plan"].credential == CredentialRef(store="claude-plan")
    assert by_id["codex-plan"].credential == CredentialRef(store="codex-plan")
    assert by_id["ollama"].auth is Auth.NONE
    assert by_id["ollama"].base_url == f"{ollama}/v1"
    assert by_id["ollama"].models == ("llama3.2",)
    assert by_id["claude-api"].credential == CredentialRef(env="ANTHROPIC_API_KEY")
    assert by_id["deepseek"].credential == CredentialRef(env="DEEPSEEK_API_KEY")
    assert settings.ladder.rung_budget_usd == {"cheap": 5, "premium": 0}
    text = path.read_text()
    assert "rungway doctor" in text
    assert "rungway serve" in text
    for secret in SECRETS:
        assert secret not in text
        assert secret not in done.stdout + done.stderr
    store = CredentialStore(_store(home), STORE_KEY.encode())
    assert store.get("claude-plan").refresh_token == "sk-ant-ort01-fixture-refresh-0123456789"
    assert store.get("codex-plan").account_id == "acct-fixture"
    assert store.get("antigravity-plan").refresh_token == "1//0g-fixture-agy-refresh"
    assert by_id["antigravity-plan"].provider == "antigravity"
    assert "found  Antigravity CLI login at" in done.stdout
    # Code Assist no longer serves consumer plans: its login is noted, not offered.
    assert "gemini-plan" not in by_id
    assert "Gemini CLI login at" in done.stdout
    assert "2026-06-18" in done.stdout
    assert "found  $DEEPSEEK_API_KEY" in done.stdout
    assert "found  Ollama at" in done.stdout


@pytest.mark.parametrize("by_flag", [False, True])
def test_config_or_rungway_config_names_where_it_writes(
    home: Path, closed_port: str, by_flag: bool
) -> None:
    target = home / "elsewhere" / "gateway.yaml"
    named = {} if by_flag else {"RUNGWAY_CONFIG": str(target)}
    env = _env(home, closed_port, DEEPSEEK_API_KEY="sk-x", **named)
    done = _init(home, env, "-y", *(["--config", str(target)] if by_flag else []))
    assert done.returncode == 0, done.stderr
    assert [c.id for c in load_settings(target).connections][-1] == "deepseek"
    assert not _written(home).exists()
    # Other commands find a file named by the variable on their own, not one named by a flag.
    hint = f"`rungway doctor --config {target}`" if by_flag else "`rungway doctor` checks"
    assert hint in done.stdout


@pytest.mark.parametrize(("answer", "writes"), [("n", False), ("y", True)])
def test_the_answer_at_the_prompt_decides(
    home: Path, closed_port: str, answer: str, writes: bool
) -> None:
    controller, terminal = pty.openpty()
    try:
        # The answer waits in the terminal's input until the prompt reads it.
        os.write(controller, f"{answer}\n".encode())
        done = _init(home, _env(home, closed_port), stdin=terminal)
    finally:
        os.close(terminal)
        os.close(controller)
    assert done.returncode == 0, done.stderr
    assert f"Write it to {_written(home)}? [y/N]" in done.stdout
    assert _written(home).exists() is writes
    assert _store(home).exists() is writes
    if not writes:
        assert "Nothing written" in done.stdout


def test_without_a_terminal_or_yes_nothing_is_written(home: Path, closed_port: str) -> None:
    done = _init(home, _env(home, closed_port))
    assert done.returncode == 1
    assert "rungway init --yes" in done.stderr
    assert "credential: {store: claude-plan}" in done.stdout
    assert not _written(home).exists()
    assert not _store(home).exists()


def test_an_existing_file_is_replaced_only_with_force(home: Path, closed_port: str) -> None:
    path = _written(home)
    path.parent.mkdir(parents=True)
    path.write_text("# the operator's own config\n")
    env = _env(home, closed_port)
    done = _init(home, env, "--yes")
    assert done.returncode == 1
    assert "already exists" in done.stderr
    assert "--force" in done.stderr
    assert path.read_text() == "# the operator's own config\n"
    assert not _store(home).exists()
    forced = _init(home, env, "--yes", "--force")
    assert forced.returncode == 0, forced.stderr
    written = [c.id for c in load_settings(path).connections]
    assert written == ["claude-plan", "codex-plan", "antigravity-plan"]


def test_with_nothing_found_it_says_where_it_looked(tmp_path: Path, closed_port: str) -> None:
    done = _init(tmp_path, _env(tmp_path, closed_port), "--yes")
    assert done.returncode == 1
    assert "found nothing to connect to" in done.stderr
    for place in (".claude/.credentials.json", ".codex/auth.json", "$OPENAI_API_KEY", closed_port):
        assert place in done.stderr
    assert "credential: {env: ANTHROPIC_API_KEY}" in done.stderr
    assert not _written(tmp_path).exists()
