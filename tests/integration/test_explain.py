"""`rungway explain`: a prefix of 6 to 8 characters names a request, from the running
gateway or from its ledger file, and a prefix several requests share lists them."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic

from rungway.sim import QuotaExhaustedFault
from tests.integration.conftest import (
    CLAUDE_CODE_HEADERS,
    RunningGateway,
    StartGateway,
    Upstreams,
)

HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]


def _explain(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rungway", "explain", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=cwd,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "HOME": str(cwd or "/nonexistent"), **env},
    )


def _ask(gateway: RunningGateway, model: str = "auto/thrifty") -> str:
    # Claude Code, the one client the plan serves: these tests are about explaining requests.
    with anthropic.Anthropic(
        base_url=gateway.url, api_key="unused", max_retries=0, default_headers=CLAUDE_CODE_HEADERS
    ) as client:
        raw = client.messages.with_raw_response.create(model=model, max_tokens=64, messages=HELLO)
    return raw.headers["x-rungway-request-id"]


def _shared_prefix(first: str, second: str) -> str:
    pairs = itertools.takewhile(lambda pair: pair[0] == pair[1], zip(first, second, strict=True))
    return "".join(a for a, _ in pairs)


def test_eight_characters_explain_a_request_through_the_running_gateway(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    sims.subscription.push_fault(QuotaExhaustedFault(window="5h"))
    request_id = _ask(gateway)
    assert len(request_id) == 16
    done = _explain(request_id[:8].upper(), "--url", gateway.url)
    assert done.returncode == 0, done.stderr
    assert f"{request_id} at " in done.stdout
    assert "served by cheap on rung cheap" in done.stdout
    assert "quota_exhausted" in done.stdout
    assert "at list price" in done.stdout


def test_a_shared_prefix_lists_the_requests_it_names(
    start_gateway: StartGateway, tmp_path: Path
) -> None:
    gateway = start_gateway()
    first, second = _ask(gateway), _ask(gateway, "fast")
    shared = _shared_prefix(first, second)
    gateway.ledger.flush()
    for source in (("--url", gateway.url), ("--ledger", str(gateway.ledger_path))):
        done = _explain(shared, *source)
        assert done.returncode == 1, source
        assert f"2 requests start with {shared!r}: give more of the id" in done.stderr
        assert done.stderr.index(first) < done.stderr.index(second), "oldest first"
        assert "│ fast " in done.stderr
        assert done.stdout == ""


def test_without_a_gateway_it_reads_the_ledger_of_the_config_it_finds(
    start_gateway: StartGateway, tmp_path: Path, unused_port: int
) -> None:
    gateway = start_gateway()
    request_id = _ask(gateway, "fast")
    gateway.ledger.flush()
    folder = tmp_path / "work"
    folder.mkdir()
    # The config found in the working folder names a port nothing listens on.
    (folder / "rungway.yaml").write_text(
        f"server: {{port: {unused_port}}}\n"
        f"ledger: {{path: {gateway.ledger_path}}}\n"
        "connections:\n  - {id: local, provider: ollama, auth: none, models: [m]}\n"
    )
    done = _explain(request_id[:8], cwd=folder)
    assert done.returncode == 0, done.stderr
    assert f"{request_id} at " in done.stdout
    assert "served by cheap" in done.stdout
    nothing = _explain("zzzzzzzz", cwd=folder)
    assert nothing.returncode == 1
    assert "no request id starts with 'zzzzzzzz'" in nothing.stderr
