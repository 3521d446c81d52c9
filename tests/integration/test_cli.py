"""`rungway serve` refuses to start on a bad config, naming the file, key and problem."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _serve(config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rungway", "serve", "--config", str(config), *extra],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200"},
    )


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (
            "connections:\n  - {id: a, provider: openia, auth: none, models: [m]}\n",
            "connections[0].provider: Input should be",
        ),
        (
            "connections:\n  - {id: a, provider: openai, auth: apikey, models: [m],"
            " credential: {env: RUNGWAY_CLI_TEST_UNSET}}\n",
            "connections[0].credential: environment variable RUNGWAY_CLI_TEST_UNSET is not set",
        ),
        ("connections: [\n", "not valid YAML"),
        ("server: {port: 1}\n", "connections: Field required"),
    ],
)
def test_invalid_config_stops_serve(tmp_path: Path, document: str, expected: str) -> None:
    config = tmp_path / "rungway.yaml"
    config.write_text(document)
    done = _serve(config)
    assert done.returncode == 2
    assert "cannot start" in done.stderr
    assert str(config) in done.stderr
    assert expected in done.stderr


def test_open_bind_without_client_keys_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "rungway.yaml"
    config.write_text("connections:\n  - {id: a, provider: ollama, auth: none, models: [m]}\n")
    done = _serve(config, "--host", "0.0.0.0")
    assert done.returncode == 2
    assert "refusing to listen beyond this machine without client keys" in done.stderr


def test_missing_config_file(tmp_path: Path) -> None:
    done = _serve(tmp_path / "nope.yaml")
    assert done.returncode == 2
    assert "cannot read the config file" in done.stderr
