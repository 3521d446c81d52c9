"""A port flag outside 0..65535 is refused at the flag, with the flag named, before anything
starts or is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rungway.cli.main import app


def _config(folder: Path) -> Path:
    secret = folder / "cheap.secret"
    secret.write_text("sk-sim-cheap")
    config = folder / "rungway.yaml"
    config.write_text(
        "server: {port: 0}\n"
        f"ledger: {{path: {folder / 'ledger.sqlite3'}}}\n"
        "connections:\n"
        "  - {id: cheap, provider: deepseek, auth: apikey, base_url: 'http://127.0.0.1:9/v1',\n"
        f"      credential: {{file: {secret}}}, models: [deepseek-chat]}}\n"
    )
    return config


@pytest.mark.parametrize("port", ["99999", "65536", "-1"])
@pytest.mark.parametrize("command", ["serve", "demo", "sim-upstream"])
def test_a_port_out_of_range_is_refused_at_the_flag(
    tmp_path: Path, command: str, port: str
) -> None:
    extra = {
        "serve": ["--config", str(_config(tmp_path))],
        "demo": ["--data-dir", str(tmp_path / "demo")],
        "sim-upstream": ["--scenario", "cheap-openai"],
    }[command]
    done = CliRunner().invoke(app, [command, *extra, "--port", port], env={"COLUMNS": "200"})
    assert done.exit_code == 2, done.output
    assert "Invalid value for '--port'" in done.output
    bound = "greater than or equal to 0" if port == "-1" else "less than or equal to 65535"
    assert bound in done.output
    assert not isinstance(done.exception, OverflowError)
    assert "Traceback" not in done.output
    assert not (tmp_path / "ledger.sqlite3").exists()
    assert not (tmp_path / "demo").exists()
