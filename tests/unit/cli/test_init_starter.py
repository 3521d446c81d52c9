"""The starter config `rungway init` renders, and where it looks for Ollama."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rungway.cli.init.discovery import (
    KEY_VARIABLES,
    Discovery,
    KeyFound,
    LoginFound,
    OllamaFound,
    ollama_base_url,
)
from rungway.cli.init.starter import build_starter
from rungway.config import parse_settings
from rungway.pricing import Tier, classify_tier


@pytest.mark.parametrize(
    ("host", "url"),
    [
        (None, "http://127.0.0.1:11434"),
        ("", "http://127.0.0.1:11434"),
        ("0.0.0.0", "http://127.0.0.1:11434"),
        ("0.0.0.0:8080", "http://127.0.0.1:8080"),
        ("127.0.0.1:9999", "http://127.0.0.1:9999"),
        ("gpu-box", "http://gpu-box:11434"),
        ("http://gpu-box", "http://gpu-box:80"),
        ("https://gpu-box/ollama/", "https://gpu-box:443/ollama"),
        ("[::1]:11434", "http://[::1]:11434"),
    ],
)
def test_ollama_host_is_read_as_ollama_reads_it(host: str | None, url: str) -> None:
    assert ollama_base_url(host) == url


def _found(
    *,
    logins: tuple[LoginFound, ...] = (),
    keys: tuple[KeyFound, ...] = (),
    models: tuple[str, ...] = (),
) -> Discovery:
    ollama = OllamaFound("http://127.0.0.1:11434", models) if models else None
    return Discovery(logins, keys, ollama, (), "http://127.0.0.1:11434")


def test_model_names_that_yaml_would_misread_are_quoted() -> None:
    starter = build_starter(_found(models=("qwen3:8b", "1.5", "yes", "null", "a, b")))
    settings = parse_settings(yaml.safe_load(starter.text))
    assert settings.connections[0].models == ("qwen3:8b", "1.5", "yes", "null", "a, b")


def test_plans_come_first_and_every_key_has_a_model_below_premium() -> None:
    keys = tuple(KeyFound(variable, provider) for variable, provider in KEY_VARIABLES)
    login = LoginFound("claude", Path("/home/x/.claude/.credentials.json"))
    starter = build_starter(_found(logins=(login,), keys=keys))
    settings = parse_settings(yaml.safe_load(starter.text))
    assert settings.connections[0].id == "claude-plan"
    assert [(each.kind, each.name, each.source) for each in starter.imports] == [
        ("claude", "claude-plan", "/home/x/.claude/.credentials.json")
    ]
    # Closing premium is safe only because each key also serves something cheaper.
    assert settings.ladder.rung_budget_usd == {"cheap": 5, "premium": 0}
    for connection in settings.connections[1:]:
        tiers = {
            classify_tier(connection.provider, m, settings.tiers).tier for m in connection.models
        }
        assert tiers - {Tier.PREMIUM}, connection.id
