"""The config's stored-credential option: `credential: {store: NAME}`, `credentials:` and
`token_url`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet

from rungway.config import ConfigError, parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.credentials.store import KEY_ENV, CredentialStore, StoredCredential


def _document(credential: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "connections": [
            {
                "id": "plan",
                "provider": "anthropic",
                "auth": "oauth",
                "credential": credential,
                "models": ["claude-sonnet-4-5"],
                **extra,
            }
        ],
    }


@pytest.mark.parametrize(
    "credential",
    [{}, {"env": "A", "store": "b"}, {"file": "/x", "store": "b"}, {"env": "A", "file": "/x"}],
)
def test_a_credential_names_exactly_one_place(credential: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"exactly one of `env`.*`file`.*or `store`"):
        parse_settings(_document(credential))


def test_a_stored_credential_is_read_from_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = Fernet.generate_key()
    monkeypatch.setenv("RW_TEST_STORE_KEY", key.decode())
    CredentialStore(tmp_path / "c.enc", key).put(
        "claude-max", StoredCredential(kind="claude", access_token="sk-ant-oat01-x")
    )
    settings = parse_settings(
        {
            **_document({"store": "claude-max"}, token_url="http://127.0.0.1:9/v1/oauth/token"),
            "credentials": {"path": str(tmp_path / "c.enc"), "key": {"env": "RW_TEST_STORE_KEY"}},
        }
    )
    assert settings.connections[0].token_url == "http://127.0.0.1:9/v1/oauth/token"
    secrets = read_secrets(settings)
    assert secrets["connection:plan"].get_secret_value() == "sk-ant-oat01-x"


def test_a_missing_stored_credential_says_how_to_import_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, Fernet.generate_key().decode())
    settings = parse_settings(
        {**_document({"store": "nope"}), "credentials": {"path": str(tmp_path / "c.enc")}}
    )
    with pytest.raises(ConfigError, match=r"connections\[0\].credential: no credential 'nope'"):
        read_secrets(settings)


def test_an_unreadable_store_key_is_reported_under_credentials(tmp_path: Path) -> None:
    settings = parse_settings(
        {
            **_document({"store": "x"}),
            "credentials": {"path": str(tmp_path / "c.enc"), "key": {"env": "RW_UNSET_KEY"}},
        }
    )
    with pytest.raises(ConfigError, match="credentials: environment variable RW_UNSET_KEY"):
        read_secrets(settings)


def test_a_token_url_must_be_an_http_url() -> None:
    with pytest.raises(ConfigError, match="token_url"):
        parse_settings(_document({"env": "A"}, token_url="ftp://nowhere"))
