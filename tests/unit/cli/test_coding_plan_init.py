"""Kimi Code and MiniMax Token Plan keys found by `rungway init` become rung-0 plan
connections in the starter config."""

from __future__ import annotations

import socket

import pytest
import yaml

from rungway.cli.init.discovery import Discovery, KeyFound, discover
from rungway.cli.init.starter import build_starter
from rungway.config import Provider, parse_settings


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("variable", "provider"),
    [("KIMI_API_KEY", "kimi-code"), ("MINIMAX_API_KEY", "minimax-token-plan")],
)
def test_init_finds_a_coding_plan_key(
    variable: str, provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, "sk-plan-key")
    # Nothing listens there: Ollama is looked for and not found, at once.
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{_unused_port()}")
    assert KeyFound(variable, provider) in discover().keys


def test_a_moonshot_platform_key_is_not_taken_for_kimi_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KIMI_API_KEY", raising=False)
    monkeypatch.setenv("MOONSHOT_API_KEY", "sk-moonshot-platform")
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{_unused_port()}")
    assert all(key.provider != "kimi-code" for key in discover().keys)


def test_the_starter_makes_plan_connections_of_both_keys() -> None:
    keys = (
        KeyFound("KIMI_API_KEY", "kimi-code"),
        KeyFound("MINIMAX_API_KEY", "minimax-token-plan"),
    )
    starter = build_starter(Discovery((), keys, None, (), "http://127.0.0.1:11434"))
    settings = parse_settings(yaml.safe_load(starter.text))
    made = {
        (c.id, c.provider, c.auth, c.credential.env if c.credential else None, c.models)
        for c in settings.connections
    }
    assert made == {
        ("kimi-plan", "kimi-code", "apikey", "KIMI_API_KEY", ("kimi-for-coding", "k3")),
        (
            "minimax-plan",
            "minimax-token-plan",
            "apikey",
            "MINIMAX_API_KEY",
            ("MiniMax-M2.7", "MiniMax-M3"),
        ),
    }
    assert "Kimi Code key from $KIMI_API_KEY (rung 0, subscription)" in starter.text
    assert "sk-api- key is refused (401)" in " ".join(starter.text.replace("#", " ").split())
