"""`rungway doctor` finds its config like every command, and asks each API whether it is
where the base URL points, without credentials."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from rungway.cli.findings import Level
from rungway.cli.probes import Probe, api_finding
from rungway.config import ConnectionConfig
from rungway.protocol.auth import Auth

from .conftest import CHEAP_KEY, CLAUDE, DEEPSEEK, SUBSCRIPTION_TOKEN, Upstreams

# `rungway` as a bare install runs it: the test extra's HTTP client cannot be imported.
WITHOUT_HTTPX = (
    "import runpy, sys\n"
    "sys.modules['httpx'] = None\n"
    "sys.argv[0] = 'rungway'\n"
    "runpy.run_module('rungway', run_name='__main__')\n"
)


def _doctor(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_HTTPX, "doctor", "--timeout", "2", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=cwd,
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "COLUMNS": "250",
            "HOME": str(cwd),
            "XDG_CONFIG_HOME": str(cwd / "no-user-config"),
            **(env or {}),
        },
    )


def _write(path: Path, folder: Path, connections: list[dict[str, Any]]) -> Path:
    document = {"ledger": {"path": str(folder / "ledger.sqlite3")}, "connections": connections}
    path.write_text(yaml.safe_dump(document))
    return path


def _keyless(connection_id: str, url: str) -> dict[str, Any]:
    return {
        "id": connection_id,
        "provider": "openai-compatible",
        "auth": "none",
        "base_url": url,
        "models": [DEEPSEEK],
    }


def test_doctor_finds_its_config_by_the_lookup_rule_and_runs_without_httpx(
    sims: Upstreams, tmp_path: Path
) -> None:
    here = tmp_path / "here"
    here.mkdir()
    _write(here / "rungway.yaml", tmp_path, [_keyless("cheap", f"{sims.cheap.url}/v1")])
    found = _doctor(cwd=here)
    assert found.returncode == 0, found.stdout + found.stderr
    assert f"OK   config: {here / 'rungway.yaml'}: valid, 1 connections" in found.stdout

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    named = _write(tmp_path / "named.yaml", tmp_path, [_keyless("cheap", f"{sims.cheap.url}/v1")])
    found = _doctor(cwd=elsewhere, env={"RUNGWAY_CONFIG": str(named)})
    assert found.returncode == 0, found.stdout + found.stderr
    assert f"OK   config: {named}: valid" in found.stdout

    # An invalid config found by the rule is still a finding, not a refusal to run.
    named.write_text("connections: []\n")
    found = _doctor(cwd=elsewhere, env={"RUNGWAY_CONFIG": str(named)})
    assert found.returncode == 1
    assert "FAIL config:" in found.stdout

    missing = _doctor(cwd=elsewhere)
    assert missing.returncode == 2
    assert "no config file" in missing.stderr


def test_doctor_asks_each_api_for_its_models_and_names_the_base_url_meant(
    sims: Upstreams, tmp_path: Path
) -> None:
    (tmp_path / "cheap.secret").write_text(CHEAP_KEY)
    (tmp_path / "plan.secret").write_text(SUBSCRIPTION_TOKEN)

    def connection(connection_id: str, provider: str, auth: str, url: str) -> dict[str, Any]:
        secret = "plan" if provider == "anthropic" else "cheap"
        return {
            "id": connection_id,
            "provider": provider,
            "auth": auth,
            "credential": {"file": str(tmp_path / f"{secret}.secret")},
            "base_url": url,
            "models": [CLAUDE if provider == "anthropic" else DEEPSEEK],
        }

    config = _write(
        tmp_path / "rungway.yaml",
        tmp_path,
        [
            connection("cheap", "deepseek", "apikey", f"{sims.cheap.url}/v1"),
            connection("bare", "openai-compatible", "apikey", sims.cheap.url),
            connection("plan", "anthropic", "oauth", sims.subscription.url),
            connection("planv1", "anthropic", "oauth", f"{sims.subscription.url}/v1"),
        ],
    )
    checked = _doctor("--config", str(config), cwd=tmp_path)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    lines = checked.stdout.splitlines()
    assert (
        f"OK   connection cheap: {sims.cheap.url}/v1/models answers HTTP 401: "
        "the OpenAI-compatible API is there (credentials not checked)"
    ) in lines
    bare = lines.index(
        f"FAIL connection bare: {sims.cheap.url}/models answers HTTP 404: "
        f"did you mean {sims.cheap.url}/v1?"
    )
    assert "includes the version path" in lines[bare + 1]
    assert (
        f"OK   connection plan: {sims.subscription.url}/v1/models answers HTTP 401: "
        "the Anthropic Messages API is there (credentials not checked)"
    ) in lines
    planv1 = lines.index(
        f"FAIL connection planv1: {sims.subscription.url}/v1/v1/models answers HTTP 404: "
        f"did you mean {sims.subscription.url}?"
    )
    assert "leaves out the version path" in lines[planv1 + 1]
    assert "2 failed" in lines[-1]
    asked = [*sims.cheap.requests, *sims.subscription.requests]
    assert sorted(request.path for request in asked) == [
        "/models",
        "/v1/models",
        "/v1/models",
        "/v1/v1/models",
    ]
    assert all(request.method == "GET" for request in asked)
    for request in asked:
        assert request.header("authorization") is None
        assert request.header("x-api-key") is None


OPENAI = ConnectionConfig(
    id="c", provider="openai", auth=Auth.NONE, base_url="https://api.example/v1", models=("m",)
)
URL = "https://api.example/v1/models"


@pytest.mark.parametrize(
    ("probe", "level", "said", "fix"),
    [
        (Probe("c", URL, 200), Level.OK, "the OpenAI-compatible API is there", ""),
        (Probe("c", URL, 403), Level.OK, "the OpenAI-compatible API is there", ""),
        (
            Probe("c", URL, 301, location="https://www.example/"),
            Level.FAIL,
            "a redirect to https://www.example/",
            "set `base_url` to the API's own address",
        ),
        (Probe("c", URL, 404), Level.FAIL, "no OpenAI-compatible API there", "openai's own is"),
        (Probe("c", URL, 429), Level.WARN, "limits this machine's requests", "rate limits"),
        (Probe("c", URL, 503), Level.WARN, "trouble of its own", "try again later"),
        (Probe("c", URL, 405), Level.WARN, "not 200, 401 or 403", "check `base_url`"),
        (
            Probe("c", URL, error="cannot connect to api.example:443"),
            Level.FAIL,
            "cannot be reached: cannot connect",
            "that the upstream is running",
        ),
    ],
)
def test_each_answer_reads_as_a_finding_with_its_fix(
    probe: Probe, level: Level, said: str, fix: str
) -> None:
    finding = api_finding("connection c", OPENAI, probe)
    assert finding.level is level
    assert said in finding.message
    assert fix in finding.fix
