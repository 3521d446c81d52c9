"""The encrypted credential store: round trips, the key's sources and its file's mode."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from rungway.credentials.store import (
    KEY_ENV,
    CredentialStore,
    StoredCredential,
    StoreError,
    load_key,
)

LOGIN = StoredCredential(
    kind="claude",
    access_token="sk-ant-oat01-store-access-secret",
    refresh_token="sk-ant-ort01-store-refresh-secret",
    expires_at=1_790_003_600.0,
    source="/home/user/.claude/.credentials.json",
)


@pytest.fixture(autouse=True)
def _no_key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)


def test_a_stored_login_reads_back_equal_and_is_not_in_the_file(tmp_path: Path) -> None:
    store = CredentialStore(tmp_path / "credentials.enc", Fernet.generate_key())
    store.put("claude-max", LOGIN)
    assert store.get("claude-max") == LOGIN
    assert store.names() == ["claude-max"]
    raw = (tmp_path / "credentials.enc").read_bytes()
    for plain in (b"sk-ant-oat01", b"store-refresh", b"claude-max", b".credentials.json"):
        assert plain not in raw
    assert stat.S_IMODE((tmp_path / "credentials.enc").stat().st_mode) == 0o600


def test_a_second_store_with_the_same_key_reads_what_the_first_wrote(tmp_path: Path) -> None:
    key = Fernet.generate_key()
    CredentialStore(tmp_path / "c.enc", key).put("one", LOGIN)
    renewed = LOGIN.renewed("sk-ant-oat01-new-access", 1_790_010_000.0, None)
    CredentialStore(tmp_path / "c.enc", key).put("one", renewed)
    stored = CredentialStore(tmp_path / "c.enc", key).get("one")
    assert stored.access_token == "sk-ant-oat01-new-access"
    assert stored.refresh_token == LOGIN.refresh_token  # no new refresh token: the old stays


def test_the_wrong_key_is_refused_with_what_to_do(tmp_path: Path) -> None:
    CredentialStore(tmp_path / "c.enc", Fernet.generate_key()).put("one", LOGIN)
    with pytest.raises(StoreError, match="cannot be decrypted with this key"):
        CredentialStore(tmp_path / "c.enc", Fernet.generate_key()).get("one")


def test_an_unknown_name_says_how_to_import_it(tmp_path: Path) -> None:
    store = CredentialStore(tmp_path / "c.enc", Fernet.generate_key())
    store.put("one", LOGIN)
    with pytest.raises(StoreError, match=r"no credential 'two'.*stored: one.*--name two"):
        store.get("two")


def test_the_key_file_is_created_once_with_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "data" / "credentials.key"
    first = load_key(file=path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_key(file=path) == first
    Fernet(first)  # a usable key


def test_a_key_file_others_can_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "credentials.key"
    path.write_bytes(Fernet.generate_key())
    path.chmod(0o644)
    with pytest.raises(StoreError, match="chmod 600"):
        load_key(file=path)


def test_the_key_from_the_environment_wins_over_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = Fernet.generate_key()
    monkeypatch.setenv(KEY_ENV, key.decode())
    assert load_key(file=tmp_path / "credentials.key") == key
    assert not (tmp_path / "credentials.key").exists()


def test_a_named_variable_must_be_set_and_hold_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(StoreError, match="RW_TEST_KEY is not set"):
        load_key(env="RW_TEST_KEY")
    monkeypatch.setenv("RW_TEST_KEY", "not-a-key")
    with pytest.raises(StoreError, match="does not hold a valid key"):
        load_key(env="RW_TEST_KEY")
