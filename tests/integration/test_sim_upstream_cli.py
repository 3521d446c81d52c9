"""`rungway sim-upstream` prints a connection that, pasted into a config, reaches it."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from rungway.app import build_gateway
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.sim import builtin_scenario, load_scenario
from tests.integration.conftest import CLAUDE_CODE_HEADERS


@dataclass
class Printed:
    """What the command printed once its sim listened."""

    url: str
    expects: str
    export: str | None
    entry: dict[str, Any]


def _read(process: subprocess.Popen[str]) -> Printed:
    assert process.stdout is not None
    lines: list[str] = []
    while not lines or not lines[-1].startswith("    models:"):
        line = process.stdout.readline()
        assert line, "the command stopped before printing its connection"
        lines.append(line.rstrip("\n"))
    url = lines[0].rsplit(" at ", 1)[1]
    expects = lines[2].removeprefix("credential it expects: ")
    export = expects.split("(export ", 1)[1].rstrip(")") if "(export " in expects else None
    assert lines[3] == "a connection for the config's `connections:` list:"
    (entry,) = yaml.safe_load("\n".join(lines[4:]))
    return Printed(url, expects.split(" ", 1)[0], export, entry)


@pytest.fixture
def printed(request: pytest.FixtureRequest) -> Iterator[Printed]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rungway",
            "sim-upstream",
            "--scenario",
            request.param,
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    # A command that never prints its connection is stopped, which ends the reading.
    watchdog = threading.Timer(20, process.kill)
    watchdog.start()
    try:
        read = _read(process)
        watchdog.cancel()
        yield read
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


@pytest.mark.parametrize(
    ("printed", "base_path", "provider"),
    [
        ("cheap-openai", "/v1", "openai-compatible"),
        ("local-ollama", "/v1", "openai-compatible"),
        ("claude-plan", "", "anthropic"),
        ("codex-plan", "/backend-api/codex", "codex"),
        ("copilot-seat", "/v1", "copilot"),
        ("gemini-api", "/v1beta", "gemini"),
        ("gemini-code-assist", "/v1internal", "gemini-code-assist"),
        ("kimi-plan", "/coding", "kimi-code"),
        ("minimax-plan", "/anthropic", "minimax-token-plan"),
    ],
    indirect=["printed"],
)
def test_the_printed_connection_pasted_into_a_config_serves_a_request(
    printed: Printed, base_path: str, provider: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    entry = printed.entry
    scenario = load_scenario(builtin_scenario(entry["id"]))
    assert entry["base_url"] == printed.url + base_path
    assert entry["provider"] == provider
    assert printed.expects == (scenario.auth.token or "none")
    if printed.export is not None:
        variable, value = printed.export.split("=", 1)
        assert entry["credential"] == {"env": variable}
        monkeypatch.setenv(variable, value)
    else:
        assert entry["auth"] == "none"
        assert "credential" not in entry

    if provider == "gemini-code-assist":
        # Asked in the OpenAI shape, not by the Gemini CLI its terms name: widened on purpose.
        entry = {**entry, "clients": "any"}
    settings = parse_settings(
        {
            "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
            "quota": {"poll_interval_s": 0},
            "connections": [entry],
        }
    )
    gateway = build_gateway(settings, read_secrets(settings))
    model = scenario.models[0].id
    with BackgroundServer(uvicorn_config(gateway.app), "gateway") as server:
        if provider == "anthropic":
            answer = httpx.post(
                f"{server.url}/v1/messages",
                json={
                    "model": model,
                    "max_tokens": 64,
                    "messages": [{"role": "user", "content": "hi"}],
                },
                # As Claude Code asks: a Claude plan serves Claude Code only.
                headers=CLAUDE_CODE_HEADERS,
                timeout=30,
            )
        else:
            answer = httpx.post(
                f"{server.url}/v1/chat/completions",
                json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
                timeout=30,
            )
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-rungway-connection"] == entry["id"]


@pytest.mark.parametrize("name", ["cheap-openai", "anthropic-api"])
def test_a_canned_upstream_replays_one_real_answer_to_every_request(name: str) -> None:
    command = [sys.executable, "-m", "rungway", "sim-upstream", "--scenario", name]
    with subprocess.Popen(
        [*command, "--port", "0", "--canned"], stdout=subprocess.PIPE, text=True
    ) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.startswith(f"canned upstream {name!r}")
            url = line.rsplit(" at ", 1)[1].strip()
            path = "/v1/messages" if name.startswith("anthropic") else "/v1/chat/completions"
            with httpx.Client() as client:
                answers = [client.post(url + path, content=b"{}") for _ in range(3)]
        finally:
            process.send_signal(signal.SIGINT)
    assert all(answer.status_code == 200 for answer in answers)
    assert answers[0].content == answers[2].content
    usage = answers[0].json()["usage"]
    assert (usage.get("completion_tokens") or usage.get("output_tokens")) > 0
    # The quota readings the simulated upstream sent come along.
    assert any("remaining" in header for header in answers[0].headers)
