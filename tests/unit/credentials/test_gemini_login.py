"""The Gemini CLI's Google login: reading `oauth_creds.json`, renewing it at Google's token
endpoint, and finding the login's Code Assist project."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import parse_qs

import orjson
import pytest
from pydantic import SecretStr, ValidationError

from rungway.clock import FakeClock
from rungway.config import ConnectionConfig
from rungway.credentials.code_assist import CodeAssistProject, static_token
from rungway.credentials.grants import (
    GEMINI_CLIENT_ID,
    TOKEN_URLS,
    Renewed,
    Revoked,
    TokenRequest,
    read_refresh,
    refresh_request,
)
from rungway.credentials.logins import LoginError, read_login
from rungway.credentials.manager import TokenManager
from rungway.credentials.store import StoredCredential

START = 1_790_000_000.0
CREDS = {
    "access_token": "ya29.a0-access",
    "refresh_token": "1//0g-refresh",
    "scope": "https://www.googleapis.com/auth/cloud-platform openid",
    "token_type": "Bearer",
    "id_token": "eyJ.id.token",
    "expiry_date": 1_790_003_600_123,
}
Answer = tuple[int, Mapping[str, str], bytes]


def test_the_gemini_cli_login_gives_tokens_and_expiry_in_seconds(tmp_path: Path) -> None:
    path = tmp_path / "oauth_creds.json"
    path.write_bytes(orjson.dumps(CREDS))
    login = read_login("gemini", str(path))
    assert login.kind == "gemini"
    assert login.access_token == "ya29.a0-access"
    assert login.refresh_token == "1//0g-refresh"
    assert login.expires_at == pytest.approx(1_790_003_600.123)
    assert login.id_token == "eyJ.id.token"


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ({"api_key": "x"}, "access_token"),
        ({**CREDS, "refresh_token": ""}, "refresh_token"),
        ({**CREDS, "expiry_date": "soon"}, "expiry_date"),
    ],
)
def test_a_broken_gemini_login_is_refused_without_quoting_a_token(
    tmp_path: Path, document: dict[str, object], says: str
) -> None:
    path = tmp_path / "oauth_creds.json"
    path.write_bytes(orjson.dumps(document))
    with pytest.raises(LoginError, match=says) as caught:
        read_login("gemini", str(path))
    assert "ya29" not in str(caught.value)


def test_the_refresh_is_googles_form_encoded_grant_with_the_clis_client() -> None:
    login = StoredCredential(kind="gemini", access_token="a", refresh_token="1//rt")
    request = refresh_request(login, TOKEN_URLS["gemini"])
    assert request.method == "POST"
    assert request.url == "https://oauth2.googleapis.com/token"
    assert request.headers["content-type"] == "application/x-www-form-urlencoded"
    form = parse_qs((request.body or b"").decode())
    assert form["grant_type"] == ["refresh_token"]
    assert form["refresh_token"] == ["1//rt"]
    assert form["client_id"] == [GEMINI_CLIENT_ID]
    assert form["client_secret"][0].startswith("GOCSPX-")


def test_googles_answer_renews_the_token_and_keeps_the_refresh_token() -> None:
    login = StoredCredential(kind="gemini", access_token="a", refresh_token="1//rt")
    answer = {"access_token": "ya29.new", "expires_in": 3599, "token_type": "Bearer"}
    result = read_refresh(login, 200, {}, orjson.dumps(answer), START)
    assert isinstance(result, Renewed)
    assert result.access_token == "ya29.new"
    assert result.expires_at == START + 3599
    assert result.credential.refresh_token == "1//rt"
    refused = {"error": "invalid_grant", "error_description": "Token has been expired or revoked."}
    assert isinstance(read_refresh(login, 400, {}, orjson.dumps(refused), START), Revoked)


def test_the_token_manager_renews_a_gemini_login_at_the_configured_url() -> None:
    sent: list[TokenRequest] = []

    async def endpoint(request: TokenRequest) -> Answer:
        sent.append(request)
        return 200, {}, orjson.dumps({"access_token": "ya29.renewed", "expires_in": 3600})

    login = StoredCredential(
        kind="gemini", access_token="ya29.old", refresh_token="1//rt", expires_at=START + 10
    )
    manager = TokenManager(
        "gemini",
        login,
        token_url="http://127.0.0.1:9/token",
        clock=FakeClock(START),
        save=lambda name, credential: None,
        send=endpoint,
    )
    token = asyncio.run(manager.token())
    assert token is not None
    assert token.get_secret_value() == "ya29.renewed"
    assert [request.url for request in sent] == ["http://127.0.0.1:9/token"]


class CodeAssist:
    """A scripted Code Assist: answers each method from a list, in order."""

    def __init__(self, **answers: list[dict[str, object]]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, dict[str, object], str]] = []

    async def __call__(self, request: TokenRequest) -> Answer:
        method = request.url.rsplit(":", 1)[1]
        body = orjson.loads(request.body or b"{}")
        self.calls.append((method, body, request.headers.get("authorization", "")))
        queue = self.answers.get(method)
        if not queue:
            return 404, {}, b'{"error":{"code":404}}'
        return 200, {}, orjson.dumps(queue.pop(0) if len(queue) > 1 else queue[0])


def _project(upstream: CodeAssist) -> CodeAssistProject:
    return CodeAssistProject(
        "http://ca/v1internal", static_token(SecretStr("ya29.t")), send=upstream, wait_s=0.0
    )


def test_a_set_up_account_names_its_project_in_load_code_assist_once() -> None:
    upstream = CodeAssist(
        loadCodeAssist=[{"currentTier": {"id": "free-tier"}, "cloudaicompanionProject": "p-1"}]
    )
    project = _project(upstream)
    assert project.current() is None

    async def twice() -> list[str | None]:
        return list(await asyncio.gather(project.discover(), project.discover()))

    assert asyncio.run(twice()) == ["p-1", "p-1"]
    assert project.current() == "p-1"
    assert [(method, auth) for method, _, auth in upstream.calls] == [
        ("loadCodeAssist", "Bearer ya29.t")
    ]


def test_a_new_account_is_onboarded_to_its_default_tier_until_the_operation_is_done() -> None:
    upstream = CodeAssist(
        loadCodeAssist=[
            {"allowedTiers": [{"id": "legacy-tier"}, {"id": "free-tier", "isDefault": True}]}
        ],
        onboardUser=[
            {"name": "op-1", "done": False},
            {"name": "op-1", "done": True, "response": {"cloudaicompanionProject": {"id": "p-2"}}},
        ],
    )
    project = _project(upstream)
    assert asyncio.run(project.discover()) == "p-2"
    onboarding = [body for method, body, _ in upstream.calls if method == "onboardUser"]
    assert len(onboarding) == 2
    assert all(body["tierId"] == "free-tier" for body in onboarding)


def test_a_failed_discovery_says_why_and_is_tried_again_later() -> None:
    upstream = CodeAssist()
    project = _project(upstream)
    assert asyncio.run(project.discover()) is None
    assert project.problem is not None
    assert "loadCodeAssist answered HTTP 404" in project.problem
    upstream.answers["loadCodeAssist"] = [{"cloudaicompanionProject": "p-3"}]
    assert asyncio.run(project.discover()) == "p-3"
    assert project.problem is None


def test_a_refused_token_is_renewed_once_and_the_call_made_again() -> None:
    tokens = iter(["ya29.old", "ya29.new"])
    current = ["ya29.old"]

    async def token() -> SecretStr | None:
        return SecretStr(current[0])

    async def renew(rejected: SecretStr | None) -> str | None:
        assert rejected is not None
        assert rejected.get_secret_value() == "ya29.old"
        next(tokens)
        current[0] = next(tokens)
        return None

    calls: list[str] = []

    async def upstream(request: TokenRequest) -> Answer:
        calls.append(request.headers["authorization"])
        if request.headers["authorization"] == "Bearer ya29.old":
            return 401, {}, b'{"error":{"code":401,"status":"UNAUTHENTICATED"}}'
        return 200, {}, orjson.dumps({"cloudaicompanionProject": "p-4"})

    project = CodeAssistProject("http://ca/v1internal", token, renew=renew, send=upstream)
    assert asyncio.run(project.discover()) == "p-4"
    assert calls == ["Bearer ya29.old", "Bearer ya29.new"]


def test_a_tier_that_needs_a_named_project_gets_the_configured_one() -> None:
    upstream = CodeAssist(loadCodeAssist=[{"currentTier": {"id": "standard-tier"}}])
    project = CodeAssistProject(
        "http://ca/v1internal",
        static_token(SecretStr("ya29.t")),
        configured="my-project-42",
        send=upstream,
    )
    assert asyncio.run(project.discover()) == "my-project-42"
    ((name, body, _),) = upstream.calls
    assert name == "loadCodeAssist"
    assert body["cloudaicompanionProject"] == "my-project-42"
    assert body["metadata"]["duetProject"] == "my-project-42"  # type: ignore[index]


def test_without_a_configured_project_such_a_tier_says_to_name_one() -> None:
    upstream = CodeAssist(loadCodeAssist=[{"currentTier": {"id": "standard-tier"}}])
    project = _project(upstream)
    assert asyncio.run(project.discover()) is None
    assert project.problem is not None
    assert "`project`" in project.problem


def test_onboarding_a_paid_tier_names_the_configured_project_and_the_free_tier_does_not() -> None:
    for tier, named in (("standard-tier", True), ("free-tier", False)):
        upstream = CodeAssist(
            loadCodeAssist=[{"allowedTiers": [{"id": tier, "isDefault": True}]}],
            onboardUser=[{"done": True, "response": {"cloudaicompanionProject": {"id": "p-5"}}}],
        )
        project = CodeAssistProject(
            "http://ca/v1internal",
            static_token(SecretStr("ya29.t")),
            configured="my-project-42",
            send=upstream,
        )
        assert asyncio.run(project.discover()) == "p-5"
        onboard = next(body for method, body, _ in upstream.calls if method == "onboardUser")
        assert ("cloudaicompanionProject" in onboard) is named


def test_a_code_assist_project_is_taken_only_for_a_code_assist_connection() -> None:
    entry = {
        "id": "plan",
        "auth": "oauth",
        "credential": {"store": "gemini-plan"},
        "models": ["gemini-2.5-pro"],
        "project": "my-project-42",
    }
    assert ConnectionConfig.model_validate({**entry, "provider": "gemini-code-assist"}).project
    with pytest.raises(ValidationError, match="Code Assist"):
        ConnectionConfig.model_validate({**entry, "provider": "anthropic"})
    with pytest.raises(ValidationError):
        ConnectionConfig.model_validate(
            {**entry, "provider": "gemini-code-assist", "project": "Not A Project"}
        )
