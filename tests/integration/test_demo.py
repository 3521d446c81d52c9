"""`rungway demo` starts as the README says and serves the SDKs."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

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
        assert (tmp_path / "rungway.yaml").exists()
        assert (tmp_path / "ledger.sqlite3").exists()
    finally:
        demo.send_signal(signal.SIGINT)
        out, err = demo.communicate(timeout=30)
    assert demo.returncode == 0, err
    assert f"http://127.0.0.1:{port}" in out
    assert "ANTHROPIC_BASE_URL" in out
