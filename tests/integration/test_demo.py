"""`rungway demo` starts as the README says and serves the SDKs."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import anthropic
import httpx
import openai


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_demo_serves_requests_and_stops_on_interrupt(tmp_path: Path) -> None:
    port = _free_port()
    demo = subprocess.Popen(
        [sys.executable, "-m", "rungway", "demo", "--port", str(port), "--data-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert demo.poll() is None, demo.stderr.read() if demo.stderr else ""
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the demo did not start"
            time.sleep(0.1)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="demo")
        raw = client.chat.completions.with_raw_response.create(
            model="deepseek-chat", messages=[{"role": "user", "content": "hello"}]
        )
        assert raw.headers["x-rungway-connection"] == "cheap"
        assert raw.parse().choices[0].message.content
        # A Claude model from an SDK: the plan's terms keep it for Claude Code, so the key.
        claude = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="demo")
        answer = claude.messages.with_raw_response.create(
            model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        )
        assert answer.headers["x-rungway-connection"] == "claude-api"
        assert (tmp_path / "rungway.yaml").exists()
        assert (tmp_path / "ledger.sqlite3").exists()
    finally:
        demo.send_signal(signal.SIGINT)
        out, err = demo.communicate(timeout=30)
    assert demo.returncode == 0, err
    assert f"http://127.0.0.1:{port}" in out
    assert "ANTHROPIC_BASE_URL" in out
    assert "claude-plan: Claude Code only, as its terms say" in err


def _wait_ready(demo: subprocess.Popen[str], port: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        assert demo.poll() is None, demo.stderr.read() if demo.stderr else ""
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the demo did not start"
        time.sleep(0.1)


def test_without_a_data_dir_the_demo_cleans_up_and_its_printed_commands_work(
    tmp_path: Path,
) -> None:
    port = _free_port()
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "TMPDIR": str(temp)}
    env["HOME"] = str(tmp_path)
    demo = subprocess.Popen(
        [sys.executable, "-m", "rungway", "demo", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "COLUMNS": "300"},
    )
    try:
        _wait_ready(demo, port)
        (folder,) = temp.iterdir()
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="demo")
        client.chat.completions.create(
            model="deepseek-chat", messages=[{"role": "user", "content": "hello"}]
        )
        client.close()
        spend = subprocess.run(
            ["rungway", "spend", "--json", "--config", str(folder / "rungway.yaml")],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=True,
        )
        assert '"requests": 1' in spend.stdout
    finally:
        demo.send_signal(signal.SIGINT)
        out, err = demo.communicate(timeout=30)
    assert demo.returncode == 0, err
    assert f"rungway spend --config {folder / 'rungway.yaml'}" in out
    assert f"rungway explain REQUEST_ID --config {folder / 'rungway.yaml'}" in out
    assert "removed when the demo stops; --data-dir DIR keeps it" in out
    assert list(temp.iterdir()) == [], "the temporary folder is removed on exit"
    assert "deepseek-chat -> cheap/deepseek-chat [cheap] 200 ok" in err


def test_a_port_in_use_stops_the_demo_before_it_starts_anything(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "rungway", "demo", "--port", str(port)],
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)},
            timeout=60,
            check=False,
        )
    assert done.returncode == 2
    assert done.stderr.startswith(f"rungway: cannot start: 127.0.0.1:{port} is in use\n")
    assert "--port" in done.stderr
    assert done.stdout == ""
    assert list(tmp_path.iterdir()) == []
