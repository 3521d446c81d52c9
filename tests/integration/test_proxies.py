"""Egress through a real proxy (pproxy): the environment's proxy variables and a
connection's own `proxy:` carry model calls, token renewals, usage reads and doctor's
probes; wrong proxy credentials cost nothing and say so in the client's API shape."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cryptography.fernet import Fernet

from rungway.clock import FakeClock
from rungway.credentials.store import KEY_ENV, CredentialStore, StoredCredential
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.sim import Scenario, SimUpstream
from rungway.sim.server import SimHttpProtocol
from tests.egress_proxy import EgressProxy
from tests.private_redis import make_certificates

from .conftest import CHEAP_KEY, CLAUDE, DEEPSEEK, START, StartGateway, Upstreams

PASSWORD = "egress-s3cret-pw"
CHAT: dict[str, Any] = {
    "model": DEEPSEEK,
    "max_tokens": 16,
    "messages": [{"role": "user", "content": "Say hello."}],
}


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EgressProxy]:
    with EgressProxy(tmp_path_factory.mktemp("pproxy"), user="alice", password=PASSWORD) as p:
        yield p


def _cheap(sims: Upstreams, folder: Path, **extra: Any) -> dict[str, Any]:
    (folder / "cheap.secret").write_text(CHEAP_KEY)
    return {
        "id": "cheap",
        "provider": "deepseek",
        "auth": "apikey",
        "credential": {"file": str(folder / "cheap.secret")},
        "base_url": sims.cheap.url + "/v1",
        "models": [DEEPSEEK],
        **extra,
    }


def _port(url: str) -> str:
    return url.rsplit(":", 1)[1].split("/", 1)[0]


def _chat(url: str) -> httpx.Response:
    return httpx.post(f"{url}/v1/chat/completions", json=CHAT, timeout=10)


@pytest.mark.parametrize("given", ["inline", "env"])
def test_a_connection_proxy_carries_its_model_calls(  # noqa: PLR0917 - fixtures
    given: str,
    start_gateway: StartGateway,
    sims: Upstreams,
    proxy: EgressProxy,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    setting: str | dict[str, str] = proxy.url("socks5h")
    if given == "env":
        monkeypatch.setenv("RW_CHEAP_PROXY", proxy.url("socks5h"))
        setting = {"env": "RW_CHEAP_PROXY"}
    gateway = start_gateway(connections=[_cheap(sims, tmp_path, proxy=setting)])
    before = len(proxy.routes())

    answers = [_chat(gateway.url) for _ in range(3)]

    assert [answer.status_code for answer in answers] == [200] * 3
    assert len(sims.cheap.requests) == 3
    # One pooled connection through the proxy carried the three requests.
    assert proxy.routes()[before:] == [f"127.0.0.1:{_port(sims.cheap.url)}"]


def test_wrong_proxy_credentials_fail_in_the_clients_shape_and_cost_nothing(
    start_gateway: StartGateway, sims: Upstreams, proxy: EgressProxy, tmp_path: Path
) -> None:
    wrong = proxy.url("http", password="not-the-password")
    gateway = start_gateway(connections=[_cheap(sims, tmp_path, proxy=wrong)])

    answer = _chat(gateway.url)

    assert answer.status_code == 502, answer.text
    error = answer.json()["error"]
    assert "refused" in error["message"]
    assert f"http://alice:***@127.0.0.1:{proxy.port}" in error["message"]
    assert "not-the-password" not in answer.text
    assert sims.cheap.requests == []
    rows = gateway.rows()
    assert [row["cost_usd"] for row in rows] == [0]
    assert "not-the-password" not in str(rows)


def test_no_proxy_sends_a_named_upstream_direct(
    start_gateway: StartGateway,
    sims: Upstreams,
    proxy: EgressProxy,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url())
    monkeypatch.setenv("NO_PROXY", "example.test,127.0.0.1")
    gateway = start_gateway(connections=[_cheap(sims, tmp_path)])
    before = len(proxy.routes())

    assert _chat(gateway.url).status_code == 200

    assert proxy.routes()[before:] == []


class _TlsSim:
    """A simulated OpenAI-compatible upstream served over TLS at `https://localhost:<port>`,
    its certificate signed by a CA this test trusts through SSL_CERT_FILE."""

    def __init__(self, folder: Path) -> None:
        self.certificates = make_certificates(folder)
        scenario = Scenario.model_validate(
            {
                "name": "tls",
                "api": "openai",
                "quota_headers": "none",
                "auth": {"kind": "bearer", "token": CHEAP_KEY},
                "models": [{"id": DEEPSEEK, "context_window": 64000}],
            }
        )
        self.sim = SimUpstream(scenario, FakeClock(START))
        config = uvicorn_config(
            self.sim,
            http=SimHttpProtocol,
            lifespan="off",
            log_config=None,
            timeout_graceful_shutdown=1,
            ssl_certfile=str(self.certificates.cert),
            ssl_keyfile=str(self.certificates.key),
        )
        self._server = BackgroundServer(config, "tls-sim")
        self.port = _port(self._server.start())
        self.url = f"https://localhost:{self.port}"

    def stop(self) -> None:
        self._server.stop()


@pytest.fixture
def tls_sim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[_TlsSim]:
    sim = _TlsSim(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(sim.certificates.ca))
    yield sim
    sim.stop()


def _tls_connection(tls_sim: _TlsSim, folder: Path, **extra: Any) -> dict[str, Any]:
    (folder / "tls.secret").write_text(CHEAP_KEY)
    return {
        "id": "secure",
        "provider": "openai-compatible",
        "auth": "apikey",
        "credential": {"file": str(folder / "tls.secret")},
        "base_url": tls_sim.url + "/v1",
        "models": [DEEPSEEK],
        **extra,
    }


def test_https_proxy_carries_a_tls_upstreams_requests_through_a_tunnel(
    start_gateway: StartGateway,
    tls_sim: _TlsSim,
    proxy: EgressProxy,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", proxy.url())
    gateway = start_gateway(connections=[_tls_connection(tls_sim, tmp_path)])
    before = len(proxy.routes())

    answer = _chat(gateway.url)

    assert answer.status_code == 200, answer.text
    assert len(tls_sim.sim.requests) == 1
    assert proxy.routes()[before:] == [f"localhost:{tls_sim.port}"]


def test_a_connection_proxy_overrides_the_environments(
    start_gateway: StartGateway,
    tls_sim: _TlsSim,
    proxy: EgressProxy,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The environment names a proxy that is not there; the connection's own is used.
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    own = _tls_connection(tls_sim, tmp_path, proxy=proxy.url("socks5"))
    direct = {**_tls_connection(tls_sim, tmp_path, proxy="direct"), "id": "direct"}
    gateway = start_gateway(connections=[own])
    before = len(proxy.routes())
    assert _chat(gateway.url).status_code == 200
    assert proxy.routes()[before:] == [f"127.0.0.1:{tls_sim.port}"]

    gateway = start_gateway(connections=[direct])
    before = len(proxy.routes())
    assert _chat(gateway.url).status_code == 200
    assert proxy.routes()[before:] == []


def test_doctor_asks_through_the_environments_proxy_and_masks_it(
    tls_sim: _TlsSim, proxy: EgressProxy, tmp_path: Path
) -> None:
    config = tmp_path / "rungway.yaml"
    own = {"env": "RW_DOCTOR_PROXY"}
    document = {
        "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
        "connections": [
            _tls_connection(tls_sim, tmp_path),
            {**_tls_connection(tls_sim, tmp_path, proxy=own), "id": "own"},
        ],
    }
    config.write_text(yaml.safe_dump(document))
    before = len(proxy.routes())
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "COLUMNS": "220",
        "HTTPS_PROXY": proxy.url(),
        "RW_DOCTOR_PROXY": proxy.url("socks5h"),
        "SSL_CERT_FILE": str(tls_sim.certificates.ca),
    }
    checked = subprocess.run(
        [sys.executable, "-m", "rungway", "doctor", "--config", str(config), "--timeout", "5"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    output = checked.stdout + checked.stderr
    assert (
        f"OK   connection secure: {tls_sim.url}/v1/models answers HTTP 401 through the proxy "
        f"http://alice:***@127.0.0.1:{proxy.port}: the OpenAI-compatible API is there"
    ) in output, output
    assert (
        f"OK   connection own: {tls_sim.url}/v1/models answers HTTP 401 through the proxy "
        f"socks5h://alice:***@127.0.0.1:{proxy.port}: the OpenAI-compatible API is there"
    ) in output, output
    assert (
        f"OK   proxy: https:// upstreams through http://alice:***@127.0.0.1:{proxy.port}; "
        "http:// upstreams direct"
    ) in output, output
    assert PASSWORD not in output
    assert proxy.routes()[before:] == [f"localhost:{tls_sim.port}"] * 2


@pytest.fixture
def login_plan() -> Iterator[SimUpstream]:
    """A Claude plan with a usage endpoint and a token endpoint."""
    scenario = Scenario.model_validate(
        {
            "name": "proxied-plan",
            "api": "anthropic",
            "quota_headers": "anthropic-unified",
            "auth": {"kind": "bearer", "token": "sk-ant-oat01-proxied-fresh-access"},
            "models": [{"id": CLAUDE, "context_window": 200000, "max_output_tokens": 8192}],
            "windows": [
                {"name": "5h", "claim": "five_hour", "capacity": 100000, "length_s": 18000}
            ],
            "oauth": {"style": "anthropic", "refresh_token": "sk-ant-ort01-proxied-refresh"},
        }
    )
    with SimUpstream(scenario, FakeClock(START)) as sim:
        yield sim


def test_a_token_renewal_goes_through_the_connections_proxy(
    start_gateway: StartGateway,
    login_plan: SimUpstream,
    proxy: EgressProxy,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = Fernet.generate_key()
    monkeypatch.setenv(KEY_ENV, key.decode())
    store = CredentialStore(tmp_path / "credentials.enc", key)
    store.put(
        "claude-max",
        StoredCredential(
            kind="claude",
            access_token="sk-ant-oat01-proxied-stale-access",
            refresh_token="sk-ant-ort01-proxied-refresh",
            expires_at=START - 60,  # already expired: renewed before the first request
        ),
    )
    port = _port(login_plan.url)
    gateway = start_gateway(
        credentials={"path": str(store.path)},
        connections=[
            {
                "id": "plan",
                "provider": "anthropic",
                "auth": "oauth",
                "credential": {"store": "claude-max"},
                "base_url": login_plan.url,
                # Named apart from the API's host, so the proxy's log tells the two apart.
                "token_url": f"http://localhost:{port}/v1/oauth/token",
                "models": [CLAUDE],
                "proxy": proxy.url("socks5h"),
            }
        ],
    )
    before = len(proxy.routes())
    answer = httpx.post(
        f"{gateway.url}/v1/messages",
        # Claude Code's own headers: a Claude plan's terms serve no other client.
        headers={
            "anthropic-version": "2023-06-01",
            "user-agent": "claude-cli/2.1.0 (external, cli)",
            "x-app": "cli",
            "anthropic-beta": "claude-code-20250219",
        },
        json={"model": CLAUDE, "max_tokens": 16, "messages": CHAT["messages"]},
        timeout=10,
    )

    assert answer.status_code == 200, answer.text
    assert login_plan.oauth is not None
    assert login_plan.oauth.token_requests == 1
    assert f"localhost:{port}" in proxy.routes()[before:]


def test_a_usage_read_goes_through_the_connections_proxy(
    start_gateway: StartGateway, login_plan: SimUpstream, proxy: EgressProxy, tmp_path: Path
) -> None:
    (tmp_path / "plan.secret").write_text("sk-ant-oat01-proxied-fresh-access")
    before = len(proxy.routes())
    start_gateway(
        quota={"poll_interval_s": 30},
        connections=[
            {
                "id": "plan",
                "provider": "anthropic",
                "auth": "oauth",
                "credential": {"file": str(tmp_path / "plan.secret")},
                "base_url": login_plan.url,
                "models": [CLAUDE],
                "proxy": proxy.url("http"),
            }
        ],
    )
    # No model request is sent: the poll at start-up is the only request upstream.
    deadline = time.monotonic() + 5
    while not login_plan.requests and time.monotonic() < deadline:
        time.sleep(0.02)

    assert login_plan.requests
    assert {request.path for request in login_plan.requests} == {"/api/oauth/usage"}
    assert set(proxy.routes()[before:]) == {f"127.0.0.1:{_port(login_plan.url)}"}


def test_a_proxy_password_appears_nowhere_an_operator_or_client_reads(
    start_gateway: StartGateway,
    sims: Upstreams,
    proxy: EgressProxy,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "wrong-but-secret-password"
    right = _cheap(sims, tmp_path, proxy=proxy.url("socks5h"))
    refused = {**_cheap(sims, tmp_path, proxy=proxy.url("http", password=wrong)), "id": "refused"}
    gateway = start_gateway(connections=[refused, right])

    answers = [_chat(gateway.url).text for _ in range(2)]

    seen = [*answers, caplog.text, str(gateway.rows())]
    with httpx.Client(base_url=gateway.url, timeout=10) as client:
        for path in ("/admin/connections", "/admin/requests", "/metrics"):
            seen.append(client.get(path).text)
        for entry in client.get("/admin/requests").json()["requests"]:
            seen.append(client.get(f"/admin/requests/{entry['request_id']}").text)
    everything = "\n".join(seen)
    # The refused proxy is named, masked, where the failure is told.
    assert f"http://alice:***@127.0.0.1:{proxy.port}" in everything
    assert wrong not in everything
    assert PASSWORD not in everything


def test_the_command_line_reaches_its_gateway_directly_whatever_the_proxy_variables(
    start_gateway: StartGateway, sims: Upstreams, tmp_path: Path
) -> None:
    gateway = start_gateway(connections=[_cheap(sims, tmp_path)])
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "COLUMNS": "220",
        # A proxy that is not there: status must not send its admin reads through it.
        "HTTP_PROXY": "http://127.0.0.1:9",
        "http_proxy": "http://127.0.0.1:9",
    }
    shown = subprocess.run(
        [sys.executable, "-m", "rungway", "status", "--url", gateway.url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "cheap" in shown.stdout
