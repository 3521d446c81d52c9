"""Without a `ladder` section the paid rungs have budgets: cheap $5 a month, premium closed;
`rungway doctor` warns about a paid rung explicitly left without a limit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import pytest
import yaml

from rungway.sim import HttpErrorFault, QuotaExhaustedFault
from tests.integration.conftest import CHEAP_KEY, DEEPSEEK, StartGateway, Upstreams

HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]


def test_thrifty_without_a_ladder_section_never_climbs_to_premium(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway(ladder={})
    sims.subscription.push_fault(QuotaExhaustedFault(window="5h"))
    with anthropic.Anthropic(base_url=gateway.url, api_key="unused", max_retries=0) as client:
        raw = client.messages.with_raw_response.create(
            model="auto/thrifty", max_tokens=64, messages=HELLO
        )
        assert raw.headers["x-rungway-rung"] == "cheap"
        # The cheap rung fails too: the default premium budget of 0 keeps the API key unused.
        sims.cheap.push_fault(HttpErrorFault(status=500))
        sims.backup.push_fault(HttpErrorFault(status=500))
        with pytest.raises(anthropic.APIStatusError):
            client.messages.create(model="auto/thrifty", max_tokens=64, messages=HELLO)
    assert sims.api.requests == [], "premium is closed unless the config opens it"
    served = next(row for row in gateway.rows() if row["rung"] == "cheap")
    skipped = {(s["rung"], s["reason"]) for s in served["plan"]["skipped"]}
    assert ("premium", "budget_disabled") in skipped


def _doctor(tmp_path: Path, sims: Upstreams, ladder: dict[str, Any] | None) -> list[str]:
    (tmp_path / "cheap.secret").write_text(CHEAP_KEY)
    document: dict[str, Any] = {
        "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
        "connections": [
            {
                "id": "cheap",
                "provider": "deepseek",
                "auth": "apikey",
                "credential": {"file": str(tmp_path / "cheap.secret")},
                "base_url": sims.cheap.url + "/v1",
                "models": [DEEPSEEK],
            }
        ],
    }
    if ladder is not None:
        document["ladder"] = ladder
    config = tmp_path / "rungway.yaml"
    config.write_text(yaml.safe_dump(document))
    checked = subprocess.run(
        [sys.executable, "-m", "rungway", "doctor", "--config", str(config), "--timeout", "2"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "COLUMNS": "220"},
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return checked.stdout.splitlines()


def test_doctor_shows_the_default_budgets(sims: Upstreams, tmp_path: Path) -> None:
    lines = _doctor(tmp_path, sims, None)
    assert "OK   budgets: cheap $5.00 a month, premium closed (0)" in lines
    assert not any(line.startswith("WARN budget") for line in lines)


def test_doctor_warns_about_a_paid_rung_left_without_a_limit(
    sims: Upstreams, tmp_path: Path
) -> None:
    lines = _doctor(
        tmp_path, sims, {"rung_budget_usd": {"cheap": None, "premium": 20}, "budget_period": "week"}
    )
    warned = lines.index(
        "WARN budget cheap: ladder.rung_budget_usd.cheap is null: the cheap rung spends without "
        "limit"
    )
    assert lines[warned + 1].strip() == (
        "fix: set `ladder.rung_budget_usd.cheap` to what it may spend each week (0 closes the rung)"
    )
    assert not any("budget premium" in line for line in lines), "premium has a limit"
    assert "1 warnings" in lines[-1]
