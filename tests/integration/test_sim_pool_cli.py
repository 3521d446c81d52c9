"""`rungway sim-upstream --scenario claude-pool` serves three accounts and prints a
connection for each that, pasted into a config, reaches that account with its own token."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
import yaml

from rungway.app import build_gateway
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.runner import BackgroundServer, uvicorn_config
from tests.integration.conftest import CLAUDE_CODE_HEADERS


def _read_until_three_connections(process: subprocess.Popen[str]) -> list[str]:
    assert process.stdout is not None
    lines: list[str] = []
    while sum(line.startswith("    models:") for line in lines) < 3:
        line = process.stdout.readline()
        assert line, "the command stopped before printing its connections"
        lines.append(line.rstrip("\n"))
    return lines


def test_each_printed_account_serves_with_its_own_token_and_reset(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    command = [sys.executable, "-m", "rungway", "sim-upstream", "--scenario", "claude-pool"]
    process = subprocess.Popen(
        [*command, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    watchdog = threading.Timer(20, process.kill)
    watchdog.start()
    try:
        lines = _read_until_three_connections(process)
        watchdog.cancel()
        assert lines[0] == "sim pool 'claude-pool': 3 accounts (anthropic API, real clock)"
        marker = lines.index("a connection per account for the config's `connections:` list:")
        entries = yaml.safe_load("\n".join(lines[marker + 1 :]))
        exports = [line.split("(export ", 1)[1].rstrip(")") for line in lines if "(export " in line]
        assert [entry["id"] for entry in entries] == [f"claude-pool-{i}" for i in (1, 2, 3)]
        assert len({entry["base_url"] for entry in entries}) == 3
        # The 5h windows, three minutes long, reset a minute apart: account 2's first.
        resets = [float(re.findall(r"5h resets in (\d+) s", line)[0]) for line in lines[1:4]]
        assert resets == pytest.approx([180, 60, 120], abs=5)
        tokens = set()
        for export in exports:
            variable, value = export.split("=", 1)
            monkeypatch.setenv(variable, value)
            tokens.add(value)
        assert len(tokens) == 3
        settings = parse_settings(
            {
                "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
                "quota": {"poll_interval_s": 0},
                "connections": entries,
            }
        )
        gateway = build_gateway(settings, read_secrets(settings))
        with BackgroundServer(uvicorn_config(gateway.app), "gateway") as server:
            for entry in entries:
                answer = httpx.post(
                    f"{server.url}/v1/messages",
                    json={
                        "model": f"{entry['id']}/claude-haiku-4-5",
                        "max_tokens": 64,
                        "messages": [{"role": "user", "content": "hi"}],
                    },
                    headers=CLAUDE_CODE_HEADERS,
                    timeout=30,
                )
                assert answer.status_code == 200, answer.text
                assert answer.headers["x-rungway-connection"] == entry["id"]
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 0
    finally:
        watchdog.cancel()
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
