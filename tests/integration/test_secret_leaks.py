"""After a full run with every kind of credential, no secret appears anywhere an operator
or a client can read: log lines, stderr, the ledger and its journal, error bodies, the
admin API, `/metrics` and the dashboard."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet

from rungway.clock import FakeClock
from rungway.credentials.store import KEY_ENV, CredentialStore, StoredCredential
from rungway.sim import HttpErrorFault, Scenario, SimUpstream, StreamErrorFault
from rungway.sim.oauth.token_spec import TokenFault

from .conftest import (
    API_KEY,
    BACKUP_KEY,
    CHEAP_KEY,
    CLAUDE,
    CLAUDE_CODE_HEADERS,
    DEEPSEEK,
    START,
    StartGateway,
    Upstreams,
)

SUBSCRIPTION_ACCESS = "sk-ant-oat01-leak-scan-access-token"
SUBSCRIPTION_REFRESH = "sk-ant-ort01-leak-scan-refresh-token"
CLIENT_KEYS = {"alice": "rw-client-alice-leak-scan", "bob": "rw-client-bob-leak-scan"}
ADMIN_KEY = "rw-admin-leak-scan-key"
STORE_KEY = Fernet.generate_key().decode()


@pytest.fixture
def login_subscription() -> Iterator[SimUpstream]:
    scenario = Scenario.model_validate(
        {
            "name": "leak-plan",
            "api": "anthropic",
            "quota_headers": "anthropic-unified",
            "auth": {"kind": "bearer", "token": SUBSCRIPTION_ACCESS},
            "models": [{"id": CLAUDE, "context_window": 200000, "max_output_tokens": 8192}],
            "windows": [
                {"name": "5h", "claim": "five_hour", "capacity": 100000, "length_s": 18000}
            ],
            # Rotating refresh tokens, so a renewed refresh token is among the secrets too.
            "oauth": {
                "style": "anthropic",
                "refresh_token": SUBSCRIPTION_REFRESH,
                "rotate_refresh_token": True,
            },
        }
    )
    with SimUpstream(scenario, FakeClock(START)) as sim:
        yield sim


def _gateway(
    start_gateway: StartGateway, sims: Upstreams, subscription: SimUpstream, tmp_path: Path
) -> Any:
    store = CredentialStore(tmp_path / "credentials.enc", STORE_KEY.encode())
    store.put(
        "claude-max",
        StoredCredential(
            kind="claude", access_token=SUBSCRIPTION_ACCESS, refresh_token=SUBSCRIPTION_REFRESH
        ),
    )
    for name, value in CLIENT_KEYS.items():
        (tmp_path / f"client-{name}.secret").write_text(value)

    def connection(cid: str, provider: str, auth: str, url: str, model: str) -> dict[str, Any]:
        return {
            "id": cid,
            "provider": provider,
            "auth": auth,
            "credential": {"file": str(tmp_path / f"{cid}.secret")},
            "base_url": url,
            "models": [model],
        }

    return start_gateway(
        credentials={"path": str(store.path)},
        admin={"key": {"env": "RW_LEAK_ADMIN"}},
        client_keys=[
            {"name": name, "key": {"file": str(tmp_path / f"client-{name}.secret")}}
            for name in CLIENT_KEYS
        ],
        ladder={"rung_budget_usd": {"cheap": 5, "premium": 5}},
        connections=[
            {
                "id": "plan",
                "provider": "anthropic",
                "auth": "oauth",
                "credential": {"store": "claude-max"},
                "base_url": subscription.url,
                "token_url": f"{subscription.url}/v1/oauth/token",
                "models": [CLAUDE],
            },
            connection("api", "anthropic", "apikey", sims.api.url, CLAUDE),
            connection("cheap", "deepseek", "apikey", sims.cheap.url + "/v1", DEEPSEEK),
            {
                **connection("backup", "openai-compatible", "apikey", sims.backup.url, DEEPSEEK),
                "base_url": sims.backup.url + "/v1",
                "credential": {"env": "RUNGWAY_IT_BACKUP"},
            },
        ],
    )


def _traffic(url: str, subscription: SimUpstream, sims: Upstreams) -> list[str]:
    """Every kind of request, success and failure; returns the bodies clients saw."""
    seen: list[str] = []
    alice = {"authorization": f"Bearer {CLIENT_KEYS['alice']}"}
    # Bob uses Claude Code, which the plan's terms allow.
    bob = {
        "x-api-key": CLIENT_KEYS["bob"],
        "anthropic-version": "2023-06-01",
        **CLAUDE_CODE_HEADERS,
    }
    claude = {"model": CLAUDE, "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}]}
    chat = {"model": DEEPSEEK, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(base_url=url, timeout=10) as client:
        seen.append(client.post("/v1/messages", headers=bob, json=claude).text)
        assert subscription.oauth is not None
        subscription.oauth.expire_access_tokens()  # the next plan request renews the login
        seen.append(client.post("/v1/messages", headers=bob, json=claude).text)
        seen.append(client.post("/v1/messages", headers=bob, json={**claude, "stream": True}).text)
        subscription.push_fault(HttpErrorFault(status=529, retry_after_s=600))
        seen.append(client.post("/v1/messages", headers=bob, json=claude).text)  # falls to api
        seen.append(client.post("/v1/chat/completions", headers=alice, json=chat).text)
        seen.append(
            client.post("/v1/chat/completions", headers=alice, json={**chat, "stream": True}).text
        )
        sims.cheap.push_fault(HttpErrorFault(status=401, message="Incorrect API key provided"))
        seen.append(client.post("/v1/chat/completions", headers=alice, json=chat).text)
        seen.append(client.post("/v1/chat/completions", json=chat).text)  # no client key
        wrong = {"authorization": "Bearer rw-not-a-client-key"}
        seen.append(client.post("/v1/chat/completions", headers=wrong, json=chat).text)
        # The 529 rests the plan; end that rest so the next request meets the revoked login.
        admin = {"authorization": f"Bearer {ADMIN_KEY}"}
        assert client.post("/admin/connections/plan/clear-cooldown", headers=admin).is_success
        subscription.oauth.push_fault(TokenFault(kind="invalid_grant"))
        subscription.oauth.expire_access_tokens()
        seen.append(client.post("/v1/messages", headers=bob, json=claude).text)
    return seen


def _operator_views(url: str) -> list[str]:
    """The admin API, `/metrics` and the dashboard, as an operator reads them."""
    admin = {"authorization": f"Bearer {ADMIN_KEY}"}
    views: list[str] = []
    with httpx.Client(base_url=url, timeout=10) as client:
        for path in ("/admin/connections", "/admin/spend", "/admin/openapi.json"):
            views.append(client.get(path, headers=admin).text)
        views.append(client.get("/admin/connections").text)  # refused without the key
        views.append(client.post("/admin/connections/plan/refresh-quota", headers=admin).text)
        recent = client.get("/admin/requests", headers=admin)
        views.append(recent.text)
        for entry in recent.json().get("requests", []):
            views.append(client.get(f"/admin/requests/{entry['request_id']}", headers=admin).text)
        metrics = client.get("/metrics", headers=admin)
        assert metrics.status_code in (200, 404)  # 404 only while /metrics is not built
        views.append(metrics.text)
        page = client.get("/dashboard")
        views.append(page.text)
        if page.status_code == 200:
            for asset in ("app.js", "api.js", "ladder.js", "requests.js", "spend.js"):
                views.append(client.get(f"/dashboard/{asset}").text)
    return views


def test_no_secret_appears_in_logs_ledger_metrics_admin_or_dashboard(  # noqa: PLR0917
    start_gateway: StartGateway,
    sims: Upstreams,
    login_subscription: SimUpstream,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(KEY_ENV, STORE_KEY)
    monkeypatch.setenv("RW_LEAK_ADMIN", ADMIN_KEY)
    caplog.set_level(logging.DEBUG)
    gateway = _gateway(start_gateway, sims, login_subscription, tmp_path)

    # A log line that quotes a header, as a library's debug output might: masked too.
    logging.getLogger("rungway.test").warning("sent Authorization: Bearer %s", SUBSCRIPTION_ACCESS)
    client_bodies = _traffic(gateway.url, login_subscription, sims)
    views = _operator_views(gateway.url)
    rows = gateway.rows()

    assert login_subscription.oauth is not None
    assert login_subscription.oauth.token_requests == 2  # one renewal, one refused (revoked)
    renewed = CredentialStore(tmp_path / "credentials.enc", STORE_KEY.encode()).get("claude-max")
    assert renewed.access_token != SUBSCRIPTION_ACCESS
    assert renewed.refresh_token != SUBSCRIPTION_REFRESH
    secrets = {
        "plan access token": SUBSCRIPTION_ACCESS,
        "plan refresh token": SUBSCRIPTION_REFRESH,
        "renewed access token": renewed.access_token,
        "rotated refresh token": renewed.refresh_token or "",
        "admin key": ADMIN_KEY,
        "store key": STORE_KEY,
        "api key": API_KEY,
        "cheap key": CHEAP_KEY,
        "backup key": BACKUP_KEY,
        **{f"client key {name}": value for name, value in CLIENT_KEYS.items()},
    }
    ledger_files = {
        path.name: path.read_bytes().decode("latin-1")
        for path in tmp_path.iterdir()
        if path.is_file() and path.name.startswith("ledger")
    }
    assert any(name.endswith(".journal") for name in ledger_files)
    places = {
        "log records": caplog.text,
        "stderr and stdout": "".join(capfd.readouterr()),
        "ledger rows": repr(rows),
        **{f"ledger file {name}": text for name, text in ledger_files.items()},
        "client responses": "\n".join(client_bodies),
        "admin, metrics and dashboard": "\n".join(views),
    }
    # The revoked login fell through to the API key; the operator sees why, with no secret.
    assert "re-import the login" in places["log records"]
    assert "sent Authorization: Bearer [redacted]" in places["log records"]
    assert "re-import the login" in places["admin, metrics and dashboard"]
    leaks = [
        f"{what} in {where}"
        for where, text in places.items()
        for what, value in secrets.items()
        if value and value in text
    ]
    assert leaks == []


# Keys of no provider's shape: only their configured values can find them in upstream text.
ECHO_OPENAI_KEY = "rw-echo-openai-credential-7f3a"
ECHO_ANTHROPIC_KEY = "rw-echo-anthropic-credential-2c9e"


@pytest.fixture
def echoing() -> Iterator[tuple[SimUpstream, SimUpstream]]:
    """An OpenAI-shaped and an Anthropic-shaped upstream with keys of no known shape."""

    def scenario(name: str, api: str, auth: dict[str, str], model: str) -> Scenario:
        return Scenario.model_validate(
            {
                "name": name,
                "api": api,
                "quota_headers": "openai" if api == "openai" else "anthropic-apikey",
                "auth": auth,
                "models": [{"id": model, "context_window": 200000, "max_output_tokens": 8192}],
                "response": {"output_tokens": 24, "chunk_tokens": 4},
            }
        )

    openai = SimUpstream(
        scenario("echo-openai", "openai", {"kind": "bearer", "token": ECHO_OPENAI_KEY}, DEEPSEEK)
    )
    anthropic = SimUpstream(
        scenario(
            "echo-anthropic",
            "anthropic",
            {"kind": "x-api-key", "token": ECHO_ANTHROPIC_KEY},
            CLAUDE,
        )
    )
    with openai, anthropic:
        yield openai, anthropic


def _echo_traffic(
    url: str, echo_openai: SimUpstream, echo_anthropic: SimUpstream, sims: Upstreams
) -> tuple[list[str], list[str]]:
    """Requests whose upstreams quote their keys in every kind of error: the bodies clients
    saw, and what `/admin/connections` said while the failed connections rested."""
    seen: list[str] = []
    resting: list[str] = []
    chat = {"model": DEEPSEEK, "messages": [{"role": "user", "content": "hi"}]}
    claude = {"model": CLAUDE, "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}]}
    messages = {"anthropic-version": "2023-06-01"}
    admin = {"authorization": f"Bearer {ADMIN_KEY}"}
    with httpx.Client(base_url=url, timeout=10) as client:

        def rested(*connections: str) -> None:
            resting.append(client.get("/admin/connections", headers=admin).text)
            for connection in connections:
                path = f"/admin/connections/{connection}/clear-cooldown"
                assert client.post(path, headers=admin).status_code == 200

        # A 401 quoting the key: the request falls through to the next connection.
        echo_openai.push_fault(HttpErrorFault(status=401, echo_credential=True))
        answer = client.post("/v1/chat/completions", json=chat)
        assert answer.status_code == 200
        seen.append(answer.text)
        rested("echo-openai")
        # A 400 goes back to the client as the upstream wrote it, and as JSON.
        echo_openai.push_fault(
            HttpErrorFault(status=400, message="Invalid request", echo_credential=True)
        )
        answer = client.post("/v1/chat/completions", json=chat)
        assert answer.status_code == 400
        assert "Invalid request" in answer.json()["error"]["message"]
        seen.append(answer.text)
        # The same 400 through translation, in the client's own API shape.
        echo_openai.push_fault(
            HttpErrorFault(status=400, message="Invalid request", echo_credential=True)
        )
        answer = client.post("/v1/messages", headers=messages, json={**claude, "model": DEEPSEEK})
        assert answer.status_code == 400
        assert answer.json()["type"] == "error"
        seen.append(answer.text)
        # Every connection fails, each quoting its key: the answer names each failure.
        echo_openai.push_fault(HttpErrorFault(status=500, echo_credential=True))
        sims.cheap.push_fault(HttpErrorFault(status=500, echo_credential=True))
        answer = client.post("/v1/chat/completions", json=chat)
        assert answer.status_code == 502
        seen.append(answer.text)
        rested("echo-openai", "cheap")
        # An error event before any content (falls through), then one after content.
        echo_openai.push_fault(StreamErrorFault(after_events=0, echo_credential=True))
        seen.append(client.post("/v1/chat/completions", json={**chat, "stream": True}).text)
        rested("echo-openai")
        echo_openai.push_fault(StreamErrorFault(after_events=3, echo_credential=True))
        seen.append(client.post("/v1/chat/completions", json={**chat, "stream": True}).text)
        rested("echo-openai")
        # An Anthropic upstream's 401 quoting the x-api-key it was sent.
        echo_anthropic.push_fault(HttpErrorFault(status=401, echo_credential=True))
        answer = client.post("/v1/messages", headers=messages, json=claude)
        assert answer.status_code == 200
        seen.append(answer.text)
        rested("echo-anthropic")
    return seen, resting


def test_keys_upstreams_echo_in_errors_reach_no_client_ledger_admin_metrics_or_log(  # noqa: PLR0917
    start_gateway: StartGateway,
    sims: Upstreams,
    echoing: tuple[SimUpstream, SimUpstream],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("RW_LEAK_ADMIN", ADMIN_KEY)
    caplog.set_level(logging.DEBUG)
    echo_openai, echo_anthropic = echoing
    for name, value in (("echo-openai", ECHO_OPENAI_KEY), ("echo-anthropic", ECHO_ANTHROPIC_KEY)):
        (tmp_path / f"{name}.secret").write_text(value)

    def connection(cid: str, provider: str, url: str, model: str) -> dict[str, Any]:
        return {
            "id": cid,
            "provider": provider,
            "auth": "apikey",
            "credential": {"file": str(tmp_path / f"{cid}.secret")},
            "base_url": url,
            "models": [model],
        }

    gateway = start_gateway(
        admin={"key": {"env": "RW_LEAK_ADMIN"}},
        ladder={"rung_budget_usd": {"cheap": 5, "premium": 5}},
        connections=[
            connection("echo-openai", "openai-compatible", echo_openai.url + "/v1", DEEPSEEK),
            connection("cheap", "deepseek", sims.cheap.url + "/v1", DEEPSEEK),
            connection("echo-anthropic", "anthropic", echo_anthropic.url, CLAUDE),
            connection("api", "anthropic", sims.api.url, CLAUDE),
        ],
    )
    client_bodies, resting = _echo_traffic(gateway.url, echo_openai, echo_anthropic, sims)
    views = _operator_views(gateway.url)
    rows = gateway.rows()

    for sim in (echo_openai, echo_anthropic, sims.cheap):
        assert sim.state().faults == []
    secrets = {
        "echoing OpenAI key": ECHO_OPENAI_KEY,
        "echoing Anthropic key": ECHO_ANTHROPIC_KEY,
        "cheap key": CHEAP_KEY,
        "api key": API_KEY,
        "admin key": ADMIN_KEY,
    }
    places = {
        "client responses": "\n".join(client_bodies),
        "ledger rows": repr(rows),
        **{
            f"ledger file {path.name}": path.read_bytes().decode("latin-1")
            for path in tmp_path.iterdir()
            if path.is_file() and path.name.startswith("ledger")
        },
        "cooldown reasons": "\n".join(resting),
        "admin, metrics and dashboard": "\n".join(views),
        "log records": caplog.text,
        "stderr and stdout": "".join(capfd.readouterr()),
    }
    leaks = [
        f"{what} in {where}"
        for where, text in places.items()
        for what, value in secrets.items()
        if value in text
    ]
    assert leaks == []
    # The echoes did happen: each place that shows upstream text shows them masked.
    for where in ("client responses", "ledger rows", "cooldown reasons"):
        assert "Incorrect API key provided: [redacted]" in places[where], where
