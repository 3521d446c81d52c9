"""The banner, doctor and the admin API say which clients each plan serves, the operator's
choice past its terms, and warn of one person's plan served to several client keys."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rungway.app import build_roster
from rungway.cli.banner import _text, facts
from rungway.cli.findings import Level
from rungway.cli.plan_terms import terms_findings
from rungway.config import Settings, parse_settings


def _settings(tmp_path: Path, keys: int = 0, **plan: Any) -> Settings:
    secret = tmp_path / "plan.token"
    secret.write_text("sk-ant-oat01-x")
    return parse_settings(
        {
            "connections": [
                {
                    "id": "claude-plan",
                    "provider": "anthropic",
                    "auth": "oauth",
                    "credential": {"file": str(secret)},
                    "models": ["claude-sonnet-4-5"],
                    **plan,
                },
                {
                    "id": "claude-api",
                    "provider": "anthropic",
                    "auth": "apikey",
                    "credential": {"file": str(secret)},
                    "models": ["claude-sonnet-4-5"],
                },
            ],
            "client_keys": [{"name": f"k{n}", "key": {"file": str(secret)}} for n in range(keys)],
        }
    )


def _findings(settings: Settings) -> list[tuple[Level, str, str]]:
    found = terms_findings(build_roster(settings), len(settings.client_keys))
    return [(f.level, f.subject, f.message) for f in found]


def test_a_claude_plan_kept_to_its_terms_is_ok_and_names_them(tmp_path: Path) -> None:
    ((level, subject, message),) = _findings(_settings(tmp_path))
    assert (level, subject) == (Level.OK, "terms claude-plan")
    assert message.startswith("Claude Code only, as its terms say (https://code.claude.com/")


def test_a_widened_plan_is_a_warning_naming_the_terms_it_goes_past(tmp_path: Path) -> None:
    ((level, _, message),) = _findings(_settings(tmp_path, clients="any"))
    assert level is Level.WARN
    assert message == (
        "any client, widened by the operator (clients: any); "
        "its terms: claude plans serve Claude Code only"
    )


def test_one_persons_plan_served_to_several_keys_is_a_warning_until_bound(tmp_path: Path) -> None:
    ((level, _, message),) = _findings(_settings(tmp_path, keys=2))
    assert level is Level.WARN
    assert "a plan for one person, served to 2 client keys" in message
    ((level, _, message),) = _findings(_settings(tmp_path, keys=2, client_key="k0"))
    assert level is Level.OK
    assert message.endswith("; bound to client key k0")
    assert _findings(_settings(tmp_path, keys=1))[0][0] is Level.OK


def test_the_banner_shows_each_plans_clients_and_the_operators_choice(tmp_path: Path) -> None:
    settings = _settings(tmp_path, keys=2, clients="any")
    shown = facts(settings, build_roster(settings), "http://127.0.0.1:4141", None, tmp_path)

    said = shown["terms"]["claude-plan"]
    assert said["note"].startswith("any client, widened by the operator (clients: any)")
    assert "served to 2 client keys" in said["warning"]
    assert "claude-api" not in shown["terms"]
    text = _text(shown)
    assert "terms" in text
    assert "claude-plan: any client, widened by the operator" in text
