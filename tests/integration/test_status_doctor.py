"""`rungway status` against a running gateway, and `rungway doctor` against a config."""

from __future__ import annotations

import base64
import datetime as dt
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import httpx
import orjson
import yaml
from cryptography.fernet import Fernet

from rungway.cli.doctor import ledger_findings, token_expiry
from rungway.cli.findings import Level
from rungway.cli.probes import Probe, clock_skew
from rungway.cli.times import countdown
from rungway.credentials.store import CredentialStore, StoredCredential
from rungway.ledger.sqlite import SqliteLedger
from rungway.sim import HttpErrorFault
from tests.integration.conftest import CLAUDE_CODE_HEADERS

from .conftest import CHEAP_KEY, DEEPSEEK, StartGateway, Upstreams

HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]


def _rungway(*args: str) -> subprocess.CompletedProcess[str]:
    return _rungway_with(*args, env={})


def _rungway_with(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rungway", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "COLUMNS": "220", **env},
    )


def test_status_shows_each_rung_with_windows_countdowns_cooldowns_and_disabled(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    # The gateway reads the plan's clock, which earlier tests may have moved past START.
    gateway = start_gateway(clock=sims.subscription.fake_clock)
    with anthropic.Anthropic(
        base_url=gateway.url, api_key="unused", max_retries=0, default_headers=CLAUDE_CODE_HEADERS
    ) as client:
        # The plan answers once (its window is read from the headers), then a 529 rests it.
        client.messages.create(model="claude-sonnet-4-5", max_tokens=32, messages=HELLO)
        sims.subscription.push_fault(HttpErrorFault(status=529, retry_after_s=600))
        client.messages.create(model="auto/thrifty", max_tokens=32, messages=HELLO)
    assert httpx.post(f"{gateway.url}/admin/connections/backup/disable").is_success

    shown = _rungway("status", "--url", gateway.url)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    for rung in ("0 subscription", "1 keyless", "2 free", "3 cheap", "4 premium"):
        assert rung in text
    lines = {line.split("│")[2].strip(): line for line in text.splitlines() if line.count("│") > 8}
    assert "5h:" in lines["plan"], "the plan's window, read from its headers"
    # Both sides share one clock that stands still: the countdowns are exact.
    assert "resets in 5h00m" in lines["plan"], "counted down on the gateway's clock"
    assert "ends in 10m00s" in lines["plan"], "the 529's cooldown"
    assert "disabled" in lines["backup"]
    assert "enabled" in lines["cheap"]
    assert lines["api"].split("│")[1].strip() == "4 premium"


def test_connections_list_dates_in_iso_a_cooldown_in_one_sentence_a_past_reset_as_stale(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    clock = sims.subscription.fake_clock
    gateway = start_gateway(clock=clock)
    with anthropic.Anthropic(
        base_url=gateway.url, api_key="unused", max_retries=0, default_headers=CLAUDE_CODE_HEADERS
    ) as client:
        assert client.messages.create(model="auto/thrifty", max_tokens=32, messages=HELLO)
        sims.subscription.push_fault(HttpErrorFault(status=529, retry_after_s=600))
        client.messages.create(model="auto/thrifty", max_tokens=32, messages=HELLO)
    subscription = next(
        entry
        for entry in httpx.get(f"{gateway.url}/admin/connections").json()["connections"]
        if entry["id"] == "plan"
    )
    (window,) = subscription["windows"]

    def iso(epoch: float) -> str:
        return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    listed = _rungway("connections", "list", "--url", gateway.url)
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if "│ plan " in line)
    assert f"5h: 0% used, allowed, resets {iso(window['resets_at'])}" in row
    # The gateway's clock stands still: the time left is exact.
    until, reason = iso(subscription["cooldown_until"]), subscription["cooldown_reason"]
    sentence = f"cooling down until {until} ({reason})"
    assert f"{sentence}, 10m00s left" in row

    # Past the reset, nothing has used the plan since: the reading is of a window that is over.
    clock.set(window["resets_at"] + 60)
    shown = _rungway("status", "--url", gateway.url)
    assert shown.returncode == 0, shown.stderr
    row = next(line for line in shown.stdout.splitlines() if "│ plan " in line)
    assert "5h: 0% used, stale; refreshed on next use" in row
    assert "resets now" not in shown.stdout
    listed = _rungway("connections", "list", "--url", gateway.url)
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if "│ plan " in line)
    assert "5h: 0% used, allowed (stale; refreshed on next use)" in row
    assert "cooling down" not in row


def test_status_says_why_when_the_gateway_cannot_be_reached(unused_port: int) -> None:
    shown = _rungway("status", "--url", f"http://127.0.0.1:{unused_port}")
    assert shown.returncode == 1
    assert "cannot reach the gateway" in shown.stderr


def _jwt(claims: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(orjson.dumps(value)).decode().rstrip("=")

    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


def _config(tmp_path: Path, connections: list[dict[str, Any]]) -> Path:
    path = tmp_path / "rungway.yaml"
    document = {"ledger": {"path": str(tmp_path / "ledger.sqlite3")}, "connections": connections}
    path.write_text(yaml.safe_dump(document))
    return path


def test_doctor_fails_on_a_dead_upstream_and_an_expired_token_with_their_fixes(
    sims: Upstreams, tmp_path: Path, unused_port: int
) -> None:
    (tmp_path / "cheap.secret").write_text(CHEAP_KEY)
    (tmp_path / "login.secret").write_text(_jwt({"exp": 1_600_000_000, "sub": "someone"}))
    config = _config(
        tmp_path,
        [
            {
                "id": "cheap",
                "provider": "deepseek",
                "auth": "apikey",
                "credential": {"file": str(tmp_path / "cheap.secret")},
                "base_url": sims.cheap.url + "/v1",
                "models": [DEEPSEEK],
            },
            {
                "id": "gone",
                "provider": "openai-compatible",
                "auth": "apikey",
                "credential": {"file": str(tmp_path / "login.secret")},
                "base_url": f"http://127.0.0.1:{unused_port}/v1",
                "models": ["some-model"],
            },
        ],
    )
    checked = _rungway("doctor", "--config", str(config), "--timeout", "2")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    lines = checked.stdout.splitlines()
    assert any(line.startswith("OK   config:") for line in lines)
    assert any(line.startswith("OK   credentials:") for line in lines)
    assert any(line.startswith("OK   ledger") and "not created yet" in line for line in lines)
    assert any(
        line.startswith(
            f"OK   connection cheap: {sims.cheap.url}/v1/models answers HTTP 401: "
            "the OpenAI-compatible API is there (credentials not checked)"
        )
        for line in lines
    )
    assert any(line.startswith("OK   connection cheap: clock within") for line in lines)
    dead = next(i for i, line in enumerate(lines) if line.startswith("FAIL connection gone:"))
    assert f"127.0.0.1:{unused_port}/v1/models cannot be reached" in lines[dead]
    assert "fix: check `base_url`, that the upstream is running" in lines[dead + 1]
    expired = next(i for i, line in enumerate(lines) if "token expired" in line)
    assert lines[expired].startswith("FAIL connection gone: token expired at 2020-09-13")
    assert "fix: log in again and update the credential" in lines[expired + 1]
    assert "2 failed" in lines[-1]
    assert CHEAP_KEY not in checked.stdout + checked.stderr


def test_doctor_names_an_unreadable_credential_and_how_to_fix_it(
    sims: Upstreams, tmp_path: Path
) -> None:
    config = _config(
        tmp_path,
        [
            {
                "id": "cheap",
                "provider": "deepseek",
                "auth": "apikey",
                "credential": {"env": "RUNGWAY_DOCTOR_UNSET"},
                "base_url": sims.cheap.url + "/v1",
                "models": [DEEPSEEK],
            }
        ],
    )
    checked = _rungway("doctor", "--config", str(config))
    assert checked.returncode == 1
    assert "RUNGWAY_DOCTOR_UNSET is not set" in checked.stdout
    assert "fix: set each environment variable or create each file named above" in checked.stdout
    broken = tmp_path / "broken.yaml"
    broken.write_text("connections: []\n")
    checked = _rungway("doctor", "--config", str(broken))
    assert checked.returncode == 1
    assert "FAIL config:" in checked.stdout
    assert "`connections` is empty" in checked.stdout


def test_doctor_reads_stored_logins_from_the_credential_store(
    sims: Upstreams, tmp_path: Path
) -> None:
    key = Fernet.generate_key().decode()
    store = CredentialStore(tmp_path / "credentials.enc", key.encode())
    # Both access tokens have expired; only the login with a refresh token renews itself.
    store.put("renewing", StoredCredential("claude", "at-1", "rt-1", expires_at=1_600_000_000))
    store.put("stuck", StoredCredential("copilot", "at-2", None, expires_at=1_600_000_000))
    config = tmp_path / "rungway.yaml"
    document = {
        "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
        "credentials": {
            "path": str(tmp_path / "credentials.enc"),
            "key": {"env": "RW_DOCTOR_STORE_KEY"},
        },
        "connections": [
            {
                "id": name,
                "provider": "anthropic",
                "auth": "oauth",
                "credential": {"store": name},
                "base_url": sims.subscription.url,
                "models": ["claude-sonnet-4-5"],
            }
            for name in ("renewing", "stuck")
        ],
    }
    config.write_text(yaml.safe_dump(document))
    checked = _rungway_with("doctor", "--config", str(config), env={"RW_DOCTOR_STORE_KEY": key})
    assert checked.returncode == 1, checked.stdout + checked.stderr
    lines = checked.stdout.splitlines()
    assert any(
        line.startswith("OK   credential store:") and "2 stored logins" in line for line in lines
    )
    assert "OK   connection renewing: stored login renews its token itself" in lines
    stuck = lines.index("FAIL connection stuck: token expired at 2020-09-13T12:26:40Z")
    assert "re-import it with `rungway connections import`" in lines[stuck + 1]
    assert "at-1" not in checked.stdout
    assert "rt-1" not in checked.stdout

    wrong = _rungway_with(
        "doctor",
        "--config",
        str(config),
        env={"RW_DOCTOR_STORE_KEY": Fernet.generate_key().decode()},
    )
    assert wrong.returncode == 1
    assert "FAIL credential store:" in wrong.stdout
    assert "cannot be decrypted with this key" in wrong.stdout


def test_doctor_reads_ledger_health(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    SqliteLedger(path).close()
    (finding,) = (f for f in ledger_findings(path) if f.subject == f"ledger {path}")
    assert finding.level is Level.OK
    assert "schema version 3, intact" in finding.message
    damaged = tmp_path / "damaged.sqlite3"
    damaged.write_bytes(b"not a database at all" * 100)
    (finding,) = ledger_findings(damaged)
    assert finding.level is Level.FAIL
    assert "move the file aside" in finding.fix


def test_clock_skew_warns_beyond_thirty_seconds_either_way() -> None:
    date = "Thu, 03 Dec 2026 07:00:00 GMT"
    upstream = 1_796_281_200.0
    for offset, level in (
        (0.4, Level.OK),
        (-29.0, Level.OK),
        (31.0, Level.WARN),
        (-95.0, Level.WARN),
    ):
        probe = Probe("c", "http://x", 200, date, "", upstream + offset)
        finding = clock_skew("c", probe)
        assert finding is not None
        assert finding.level is level, (offset, finding)
    behind = clock_skew("c", Probe("c", "http://x", 200, date, "", upstream - 95))
    assert behind is not None
    assert "95s behind" in behind.message
    assert clock_skew("c", Probe("c", "http://x", 200, None, "", upstream)) is None


def test_token_expiry_reads_only_jwts() -> None:
    now = 1_796_281_200.0
    assert token_expiry("c", "sk-plain-api-key", now) is None
    assert token_expiry("c", "a.b.c", now) is None
    soon = token_expiry("c", _jwt({"exp": now + 3 * 3600 + 60}), now)
    assert soon is not None
    assert (soon.level, soon.message) == (Level.WARN, "token expires in 3h01m")
    later = token_expiry("c", _jwt({"exp": now + 30 * 86400}), now)
    assert later is not None
    assert later.level is Level.OK


def test_countdowns_read_like_a_clock() -> None:
    assert countdown(100 + 2 * 3600 + 14 * 60 + 5, 100) == "in 2h14m"
    assert countdown(100 + 5 * 60 + 30, 100) == "in 5m30s"
    assert countdown(140, 100) == "in 40s"
    assert countdown(100 + 3 * 86400 + 4 * 3600, 100) == "in 3d4h"
    assert countdown(90, 100) == "now"
