"""A GLM Coding Plan key found by `rungway init`, and doctor's check of its endpoint."""

from __future__ import annotations

import socket

import pytest
import yaml

from rungway.app import builtin_catalog
from rungway.cli.findings import Level
from rungway.cli.glm_check import glm_findings
from rungway.cli.init.discovery import Discovery, KeyFound, discover
from rungway.cli.init.starter import build_starter
from rungway.config import ConnectionConfig, parse_settings
from rungway.routing.billing import BillingClass


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("variable", ["ZAI_API_KEY", "ZHIPUAI_API_KEY", "GLM_API_KEY"])
def test_init_finds_a_glm_plan_key_under_each_name_z_ai_tools_read(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ZAI_API_KEY", "ZHIPUAI_API_KEY", "GLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, "sk-glm-plan")
    # Nothing listens there: Ollama is looked for and not found, at once.
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{_unused_port()}")
    assert KeyFound(variable, "glm-coding") in discover().keys


def test_the_starter_makes_one_plan_connection_of_the_first_glm_key_set() -> None:
    keys = (KeyFound("ZAI_API_KEY", "glm-coding"), KeyFound("GLM_API_KEY", "glm-coding"))
    starter = build_starter(Discovery((), keys, None, (), "http://127.0.0.1:11434"))
    settings = parse_settings(yaml.safe_load(starter.text))
    (connection,) = settings.connections
    assert (connection.id, connection.provider, connection.auth) == (
        "glm-plan",
        "glm-coding",
        "apikey",
    )
    assert connection.credential is not None
    assert connection.credential.env == "ZAI_API_KEY"
    assert "GLM Coding Plan key from $ZAI_API_KEY (rung 0, subscription)" in starter.text
    words = " ".join(starter.text.replace("#", " ").split())
    assert "Claude Code here, others with `clients: any`" in words
    glm = [entry for entry in builtin_catalog() if entry.provider == "glm-coding"]
    assert [entry.billing for entry in glm] == [BillingClass.SUBSCRIPTION]


def _connection(base_url: str | None, provider: str = "glm-coding") -> ConnectionConfig:
    raw = {
        "id": "glm",
        "provider": provider,
        "auth": "apikey",
        "credential": {"env": "ZAI_API_KEY"},
        "models": ["glm-5.2"],
    }
    if base_url is not None:
        raw["base_url"] = base_url
    return ConnectionConfig.model_validate(raw)


def test_doctor_warns_of_the_general_endpoint_which_refuses_a_plan_key() -> None:
    (finding,) = glm_findings("connection glm", _connection("https://api.z.ai/api/paas/v4"))
    assert finding.level is Level.WARN
    assert "1113" in finding.message
    assert "https://api.z.ai/api/coding/paas/v4" in finding.fix


@pytest.mark.parametrize(
    "base_url",
    [None, "https://api.z.ai/api/coding/paas/v4", "https://open.bigmodel.cn/api/coding/paas/v4"],
)
def test_doctor_is_silent_on_the_coding_endpoint(base_url: str | None) -> None:
    assert glm_findings("connection glm", _connection(base_url)) == []


def test_doctor_checks_the_anthropic_endpoint_of_the_plan_too() -> None:
    coding = _connection("https://api.z.ai/api/coding/paas/v4", "glm-coding-anthropic")
    (finding,) = glm_findings("connection glm", coding)
    assert "https://api.z.ai/api/anthropic" in finding.fix
    assert glm_findings("connection glm", _connection(None, "glm-coding-anthropic")) == []
    china = _connection("https://open.bigmodel.cn/api/anthropic", "glm-coding-anthropic")
    assert glm_findings("connection glm", china) == []
