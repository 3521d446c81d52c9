"""`rungway serve` as an operator runs it: what it says at start, a line per request, and
clear failures before anything is written."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from rungway.sim import SimUpstream, builtin_scenario, load_scenario

SECRET = "sk-sim-cheap"


@dataclass
class Served:
    """A `rungway serve` process and what it printed."""

    process: subprocess.Popen[str]
    url: str

    def stop(self) -> tuple[str, str]:
        self.process.send_signal(signal.SIGINT)
        out, err = self.process.communicate(timeout=30)
        assert self.process.returncode == 0, err
        return out, err


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "COLUMNS": "200", "HOME": str(home), **extra}


@pytest.fixture(scope="module")
def cheap() -> Iterator[SimUpstream]:
    with SimUpstream(load_scenario(builtin_scenario("cheap-openai"))) as sim:
        yield sim


def _config(folder: Path, upstream: str, port: int) -> Path:
    secret = folder / "cheap.secret"
    secret.write_text(SECRET)
    config = folder / "rungway.yaml"
    config.write_text(
        f"server: {{port: {port}}}\n"
        f"ledger: {{path: {folder / 'ledger.sqlite3'}}}\n"
        "ladder: {rung_budget_usd: {cheap: 2.5, premium: 0}}\n"
        "connections:\n"
        f"  - {{id: cheap, provider: deepseek, auth: apikey, base_url: '{upstream}/v1',\n"
        f"      credential: {{file: {secret}}}, models: [deepseek-chat]}}\n"
        f"  - {{id: local, provider: ollama, auth: none, base_url: '{upstream}/v1',\n"
        "      models: [llama3.2]}\n"
    )
    return config


def _start(*args: str, cwd: Path, env: dict[str, str]) -> Served:
    process = subprocess.Popen(
        [sys.executable, "-m", "rungway", "serve", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    config = Path(cwd, "rungway.yaml").read_text()
    port = int(config.split("port: ")[1].split("}")[0])
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            raise AssertionError(process.communicate()[1])
        try:
            if httpx.get(f"{url}/healthz").status_code == 200:
                return Served(process, url)
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the gateway did not start"
        time.sleep(0.05)


def _chat(url: str, model: str = "deepseek-chat") -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    return httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30)


def test_serve_says_where_it_listens_and_logs_a_line_per_request(
    tmp_path: Path, cheap: SimUpstream
) -> None:
    port = _port()
    config = _config(tmp_path, cheap.url, port)
    # No --config: ./rungway.yaml is found in the working folder.
    served = _start(cwd=tmp_path, env=_env(tmp_path))
    answer = _chat(served.url)
    assert answer.status_code == 200
    request_id = answer.headers["x-rungway-request-id"]
    refused = _chat(served.url, "no-such-model")
    assert refused.status_code == 404
    _, err = served.stop()
    first = err.split("\n")[0]
    assert first.startswith("rungway ")
    assert first.endswith(f"listening on http://127.0.0.1:{port}")
    assert f"config     {config}" in err
    assert f"ledger     {tmp_path / 'ledger.sqlite3'}" in err
    assert "keyless       local (llama3.2)" in err
    assert "cheap         cheap (deepseek-chat); budget $2.50 a month" in err
    assert f"dashboard  http://127.0.0.1:{port}/dashboard" in err
    (line,) = [line for line in err.splitlines() if request_id in line]
    assert " INFO    access: " in line
    assert f"{request_id} deepseek-chat -> cheap/deepseek-chat [cheap] 200 ok " in line
    assert " ms $0.0" in line
    (turned_away,) = [line for line in err.splitlines() if "no-such-model" in line]
    assert refused.headers["x-rungway-request-id"] in turned_away
    assert "refused 404" in turned_away


def test_json_lines_carry_the_fields_and_mask_secrets(tmp_path: Path, cheap: SimUpstream) -> None:
    _config(tmp_path, cheap.url, _port())
    served = _start("--log-format", "json", cwd=tmp_path, env=_env(tmp_path))
    assert _chat(served.url).status_code == 200
    # A model name that is the connection's own key must not reach the log.
    assert _chat(served.url, SECRET).status_code == 404
    _, err = served.stop()
    lines = [json.loads(line) for line in err.splitlines()]
    start, served_line, refused_line = lines[0], lines[1], lines[2]
    assert start["event"] == "start"
    assert start["ladder"]["cheap"] == ["cheap (deepseek-chat)"]
    assert start["budgets"] == {"cheap": 2.5, "premium": 0.0}
    assert served_line["logger"] == "rungway.access"
    assert served_line["connection"] == "cheap"
    assert served_line["rung"] == "cheap"
    assert served_line["status"] == 200
    assert served_line["cost_usd"] > 0
    assert len(served_line["request_id"]) == 16
    assert refused_line["status"] == 404
    assert SECRET not in err
    assert "[redacted]" in refused_line["detail"]


def test_quiet_keeps_the_banner_and_drops_the_access_lines(
    tmp_path: Path, cheap: SimUpstream
) -> None:
    _config(tmp_path, cheap.url, _port())
    served = _start("--quiet", cwd=tmp_path, env=_env(tmp_path))
    answer = _chat(served.url)
    _, err = served.stop()
    assert "listening on" in err
    assert answer.headers["x-rungway-request-id"] not in err
    assert "access:" not in err


def test_a_port_in_use_stops_serve_before_anything_is_written(
    tmp_path: Path, cheap: SimUpstream
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        _config(tmp_path, cheap.url, port)
        done = subprocess.run(
            [sys.executable, "-m", "rungway", "serve"],
            cwd=tmp_path,
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2
    assert done.stderr.startswith(f"rungway: cannot start: 127.0.0.1:{port} is in use\n")
    assert "hint: pass --port" in done.stderr
    assert "listening" not in done.stderr + done.stdout
    assert not (tmp_path / "ledger.sqlite3").exists()


def test_every_command_finds_the_config_by_one_rule(tmp_path: Path, cheap: SimUpstream) -> None:
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    config = _config(folder, cheap.url, _port())
    served = _start(cwd=folder, env=_env(tmp_path))
    try:
        assert _chat(served.url).status_code == 200
        # From another folder, $RUNGWAY_CONFIG names the file; the user config dir comes last.
        env = _env(tmp_path, RUNGWAY_CONFIG=str(config))
        for command in (["status"], ["spend"], ["connections", "list"], ["doctor"]):
            done = subprocess.run(
                [sys.executable, "-m", "rungway", *command],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert done.returncode == 0, (command, done.stderr)
        xdg = tmp_path / "xdg"
        (xdg / "rungway").mkdir(parents=True)
        (xdg / "rungway" / "rungway.yaml").write_text(config.read_text())
        done = subprocess.run(
            [sys.executable, "-m", "rungway", "spend", "--json"],
            cwd=tmp_path,
            env=_env(tmp_path, XDG_CONFIG_HOME=str(xdg)),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["total"]["requests"] == 1
    finally:
        served.stop()


def test_without_any_config_serve_says_where_it_looked(tmp_path: Path) -> None:
    env = _env(tmp_path, XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    env.pop("RUNGWAY_CONFIG", None)
    done = subprocess.run(
        [sys.executable, "-m", "rungway", "serve"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "rungway: no config file" in done.stderr
    assert f"{tmp_path / 'xdg' / 'rungway' / 'rungway.yaml'}" in done.stderr
    assert "rungway init" in done.stderr
    assert os.listdir(tmp_path) == [], "nothing is created"
