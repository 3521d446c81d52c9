"""An invalid config is refused with the file, the key and the problem named."""

from __future__ import annotations

from pathlib import Path

import pytest

from rungway.config import ConfigError, check_bind, load_settings, parse_settings
from rungway.credentials.secrets import read_secrets

GOOD = """
connections:
  - id: plan
    provider: anthropic
    auth: oauth
    credential: {file: %s}
    models: [claude-sonnet-4-5]
  - id: local
    provider: ollama
    auth: none
    models: [llama3.2]
aliases:
  sonnet: claude-sonnet-4-5
"""


def test_a_good_file_loads_and_reads_its_secret_from_the_referenced_file(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text("sk-ant-oat01-secret\n")
    path = tmp_path / "rungway.yaml"
    path.write_text(GOOD % secret)
    settings = load_settings(path)
    assert [c.id for c in settings.connections] == ["plan", "local"]
    secrets = read_secrets(settings)
    assert secrets["connection:plan"].get_secret_value() == "sk-ant-oat01-secret"
    assert "sk-ant" not in repr(secrets)


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (
            {"connections": [{"id": "a", "provider": "nope", "auth": "none", "models": ["m"]}]},
            "connections[0].provider: Input should be",
        ),
        (
            {"connections": [{"id": "a", "provider": "openai", "auth": "apikey", "models": ["m"]}]},
            "connections[0]: auth `apikey` needs a `credential`",
        ),
        (
            {
                "connections": [
                    {
                        "id": "a",
                        "provider": "openai",
                        "auth": "apikey",
                        "credential": {"value": "sk-inline"},
                        "models": ["m"],
                    }
                ]
            },
            "connections[0].credential.value: Extra inputs are not permitted",
        ),
        (
            {
                "connections": [
                    {"id": "a", "provider": "openai-compatible", "auth": "none", "models": ["m"]}
                ]
            },
            "provider `openai-compatible` needs a `base_url`",
        ),
        (
            {
                "connections": [
                    {"id": "a", "provider": "ollama", "auth": "none", "models": ["m"]},
                    {"id": "a", "provider": "ollama", "auth": "none", "models": ["n"]},
                ]
            },
            "connections[1].id 'a' is used twice",
        ),
        (
            {
                "connections": [{"id": "a", "provider": "ollama", "auth": "none", "models": ["m"]}],
                "aliases": {"x": "auto/fast:"},
            },
            "aliases: alias 'x': 'auto/fast:' is not an auto id",
        ),
        (
            {
                "connections": [{"id": "a", "provider": "ollama", "auth": "none", "models": ["m"]}],
                "server": {"port": "eighty"},
            },
            "server.port: Input should be a valid integer",
        ),
    ],
)
def test_invalid_documents_name_the_key_and_problem(document: object, expected: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_settings(document, source="rungway.yaml")
    assert str(raised.value).startswith("rungway.yaml: invalid configuration")
    assert expected in str(raised.value)


def test_unreadable_yaml_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("connections: [\n")
    with pytest.raises(ConfigError, match=r"broken.yaml: not valid YAML"):
        load_settings(path)


def test_a_missing_secret_is_named_by_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUNGWAY_TEST_MISSING", raising=False)
    settings = parse_settings(
        {
            "connections": [
                {
                    "id": "a",
                    "provider": "openai",
                    "auth": "apikey",
                    "credential": {"env": "RUNGWAY_TEST_MISSING"},
                    "models": ["m"],
                }
            ]
        }
    )
    with pytest.raises(ConfigError, match=r"connections\[0\].credential: environment variable"):
        read_secrets(settings, source="rungway.yaml")


def test_without_client_keys_only_loopback_binds_are_allowed() -> None:
    settings = parse_settings(
        {"connections": [{"id": "a", "provider": "ollama", "auth": "none", "models": ["m"]}]}
    )
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        check_bind(host, settings)
    for host in ("0.0.0.0", "192.168.1.5", "::"):
        with pytest.raises(ConfigError, match="refusing to listen beyond this machine"):
            check_bind(host, settings)
