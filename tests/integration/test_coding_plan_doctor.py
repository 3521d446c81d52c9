"""`rungway doctor` reads a Kimi Code and a MiniMax Token Plan connection's usage endpoint
with its key and says what each plan has left, or that its key was refused."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from rungway.sim import SimUpstream, builtin_scenario, load_scenario


@pytest.fixture
def plans() -> Iterator[dict[str, SimUpstream]]:
    kimi = SimUpstream(load_scenario(builtin_scenario("kimi-plan")))
    minimax = SimUpstream(load_scenario(builtin_scenario("minimax-plan")))
    with kimi, minimax:
        yield {"kimi": kimi, "minimax": minimax}


def _doctor(tmp_path: Path, plans: dict[str, SimUpstream], keys: dict[str, str]) -> list[str]:
    connections = []
    for name, (provider, path, model) in {
        "kimi": ("kimi-code", "/coding", "kimi-for-coding"),
        "minimax": ("minimax-token-plan", "/anthropic", "MiniMax-M3"),
    }.items():
        (tmp_path / name).write_text(keys[name])
        connections.append(
            {
                "id": name,
                "provider": provider,
                "auth": "apikey",
                "credential": {"file": str(tmp_path / name)},
                "base_url": plans[name].url + path,
                "models": [model],
            }
        )
    document = {"ledger": {"path": str(tmp_path / "ledger.sqlite3")}, "connections": connections}
    config = tmp_path / "rungway.yaml"
    config.write_text(yaml.safe_dump(document))
    checked = subprocess.run(
        [sys.executable, "-m", "rungway", "doctor", "--config", str(config), "--timeout", "3"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "COLUMNS": "220"},
    )
    output = checked.stdout + checked.stderr
    assert all(key not in output for key in keys.values())
    return checked.stdout.splitlines()


def test_doctor_reads_each_plans_windows_and_overage(
    tmp_path: Path, plans: dict[str, SimUpstream]
) -> None:
    plans["kimi"].set_window_used("5h", 15000)
    plans["minimax"].set_window_used("5h", 4500)
    keys = {name: sim.scenario.auth.token or "" for name, sim in plans.items()}
    lines = _doctor(tmp_path, plans, keys)
    kimi = next(line for line in lines if line.startswith("OK   connection kimi: plan usage"))
    assert "5h 50% used, resets in 4h5" in kimi
    assert "7d 0% used" in kimi
    assert "it stops at its quota" in kimi
    minimax = next(line for line in lines if "connection minimax: plan usage" in line)
    assert minimax.startswith("OK")
    assert "5h 100% used" in minimax
    assert plans["kimi"].requests[-1].path == "/coding/v1/usages"
    assert plans["minimax"].requests[-1].path == "/v1/token_plan/remains"


def test_doctor_fails_a_refused_key_and_warns_of_a_plan_that_names_no_window(
    tmp_path: Path, plans: dict[str, SimUpstream]
) -> None:
    lines = _doctor(tmp_path, plans, {"kimi": "sk-wrong-kimi", "minimax": "sk-api-payg"})
    refused = next(i for i, line in enumerate(lines) if line.startswith("FAIL connection kimi:"))
    assert "usage endpoint refused its key (HTTP 401)" in lines[refused]
    assert "Kimi Code console key" in lines[refused + 1]
    silent = next(line for line in lines if line.startswith("WARN connection minimax:"))
    assert "named none of the plan's windows" in silent
    assert "(1004)" in silent
