"""Reading Claude Code, Codex and Copilot logins from the files those tools write."""

from __future__ import annotations

from pathlib import Path

import pytest

from rungway.credentials.logins import LoginError, parse_claude, read_login

FIXTURES = Path(__file__).parents[2] / "fixtures" / "credentials"


def test_a_claude_code_login_gives_tokens_and_expiry_in_seconds() -> None:
    login = read_login("claude", str(FIXTURES / "claude.credentials.json"))
    assert login.kind == "claude"
    assert login.access_token == "sk-ant-oat01-fixture-access-0123456789"
    assert login.refresh_token == "sk-ant-ort01-fixture-refresh-0123456789"
    assert login.expires_at == 1_790_003_600.0


def test_a_codex_login_gives_tokens_account_and_the_jwt_expiry() -> None:
    login = read_login("codex", str(FIXTURES / "codex.auth.json"))
    assert login.kind == "codex"
    assert login.refresh_token == "rt-fixture-refresh-0123456789"
    assert login.account_id == "acct-fixture"
    assert login.id_token == "eyJfixture.id.token"
    assert login.expires_at == 1_790_007_200.0


def test_a_copilot_token_is_read_from_an_editor_file_a_plain_file_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    login = read_login("copilot", str(FIXTURES / "copilot.apps.json"))
    assert (login.kind, login.access_token) == ("copilot", "gho_fixture0123456789abcdef")
    plain = tmp_path / "token"
    plain.write_text("gho_plainfile0123456789\n")
    assert read_login("copilot", str(plain)).access_token == "gho_plainfile0123456789"
    monkeypatch.setenv("RW_TEST_GH", "gho_fromenv0123456789")
    assert read_login("copilot", "env:RW_TEST_GH").access_token == "gho_fromenv0123456789"


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ({}, "no `claudeAiOauth` object"),
        ({"claudeAiOauth": {"accessToken": "a"}}, "refreshToken is missing"),
        ({"claudeAiOauth": {"accessToken": "", "refreshToken": "r"}}, "accessToken is missing"),
        (
            {"claudeAiOauth": {"accessToken": "a", "refreshToken": "r", "expiresAt": "soon"}},
            "expiresAt is not a number",
        ),
    ],
)
def test_a_broken_claude_login_is_refused_saying_what_is_missing(
    document: object, problem: str
) -> None:
    with pytest.raises(LoginError, match=problem):
        parse_claude(document, "creds.json")


def test_errors_never_quote_a_token(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("sk-not-a-github-token-0123456789")
    with pytest.raises(LoginError) as caught:
        read_login("copilot", str(path))
    assert "sk-not-a-github" not in str(caught.value)
    assert "does not hold a GitHub token" in str(caught.value)


def test_a_codex_api_key_login_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    path.write_text('{"OPENAI_API_KEY": "sk-proj-0123456789"}')
    with pytest.raises(LoginError, match="log in to Codex with ChatGPT") as caught:
        read_login("codex", str(path))
    assert "sk-proj" not in str(caught.value)


def test_a_missing_file_is_named() -> None:
    with pytest.raises(LoginError, match=r"cannot read .*nowhere\.json"):
        read_login("claude", "/nonexistent/nowhere.json")
