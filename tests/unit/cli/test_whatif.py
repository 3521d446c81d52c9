"""`rungway whatif` end to end on synthetic and JSONL traces, and its one-line refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rungway.cli.main import app
from rungway.ledger.sqlite import SqliteLedger
from rungway.protocol.usage import ReportedUsage
from rungway.whatif.jsonl import write_jsonl
from rungway.whatif.synthetic import generate
from tests.records import request_record

CONFIG = """\
ladder:
  rung_budget_usd: {cheap: 20, premium: 50}
connections:
  - {id: plan, provider: anthropic, auth: oauth, credential: {env: WHATIF_PLAN},
     models: [claude-sonnet-4-5, claude-haiku-4-5]}
  - {id: api, provider: anthropic, auth: apikey, credential: {env: WHATIF_API},
     models: [claude-sonnet-4-5, claude-haiku-4-5]}
  - {id: cheap, provider: deepseek, auth: apikey, credential: {env: WHATIF_CHEAP},
     models: [deepseek-chat]}
aliases:
  "claude-*": auto/thrifty
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "rungway.yaml"
    path.write_text(CONFIG)
    return path


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["whatif", *args], env={"COLUMNS": "200"})
    return result.exit_code, result.stdout, result.stderr


def test_a_synthetic_trace_is_replayed_under_every_policy_as_json(config: Path) -> None:
    code, stdout, _ = _run(
        "--config", str(config), "--synthetic", "steady", "--requests", "600", "--json"
    )
    assert code == 0
    payload = json.loads(stdout)
    figures = {figure["policy"]: figure for figure in payload["policies"]}
    assert list(figures) == ["ladder", "always-key", "fallback-429", "ttl-180s", "oracle"]
    assert payload["trace"]["requests"] == 600
    assert any("plan taken as claude-pro" in note for note in payload["notes"])
    ladder, key = figures["ladder"], figures["always-key"]
    assert ladder["paid_usd"] < key["paid_usd"]
    assert key["per_rung"] == {"cheap": 600}
    assert ladder["per_rung"]["subscription"] > 0
    assert ladder["flaps"] == 0
    assert ladder["reentry_lag"]["max_requests"] == 0
    assert figures["oracle"]["paid_usd"] <= ladder["paid_usd"] + 1e-9


def test_a_jsonl_trace_and_window_flags_make_a_table(config: Path, tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    write_jsonl(generate("bursty", requests=300, seed=3), trace)
    code, stdout, _ = _run(
        "--config",
        str(config),
        "--trace",
        str(trace),
        "--window",
        "plan:5h:5h:20:requests:first_use",
        "--window",
        "plan:week:7d:2:cost:fixed",
        "--policies",
        "ladder,always-key",
    )
    assert code == 0, stdout
    assert "plan 5h: 20 requests per 5h, first_use" in stdout
    assert "plan week: 2 cost per 7d, fixed" in stdout
    assert "policy: ladder" in stdout
    assert "policy: always-key" in stdout
    assert "compared" in stdout


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--synthetic", "lazy"], "no profile 'lazy'"),
        (["--synthetic", "steady", "--trace", "x.jsonl"], "exactly one of"),
        ([], "exactly one of"),
        (["--trace", "missing.jsonl"], "missing.jsonl"),
        (["--synthetic", "steady", "--policies", "ladder,best"], "--policies ladder,best"),
        (["--synthetic", "steady", "--plan", "plan=claude-ultra"], "name a known plan"),
        (["--synthetic", "steady", "--plan", "nope=claude-pro"], "no connection 'nope'"),
        (["--synthetic", "steady", "--window", "plan:5h:5h:45"], "CONN:NAME:LENGTH"),
        (["--synthetic", "steady", "--window", "plan:5h:5x:45:requests"], "LENGTH '5x'"),
        (["--synthetic", "steady", "--window", "plan:x:1e15:4:requests"], "plan:x:1e15:4"),
        (["--synthetic", "steady", "--window", "plan:5h:5h:45:messages"], "UNIT must be"),
        (["--synthetic", "steady", "--window", "plan:5h:5h:-1:requests"], "capacity must"),
        (["--synthetic", "steady", "--window", "plan:5h:5h:4:requests:weekly"], "ALIGNMENT"),
        (["--synthetic", "steady", "--since", "2026-01-01"], "--since and --until"),
        (["--from-ledger", "--since", "yesterday"], "--since yesterday"),
        (["--synthetic", "steady", "--plot", "out.gif"], "out.gif"),
        (["--synthetic", "steady", "--fallback-cooldown", "0"], "--fallback-cooldown 0"),
        (
            ["--synthetic", "steady", *(f"--window=plan:{name}:1h:4:requests" for name in "abc")],
            "a anthropic plan reports at most 2 account-wide windows",
        ),
    ],
)
def test_a_bad_flag_gets_one_line_naming_it(config: Path, args: list[str], named: str) -> None:
    code, stdout, stderr = _run("--config", str(config), *args)
    assert code == 2
    assert named in stderr
    assert "Traceback" not in stderr + stdout
    assert len(stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("at", ["1e15", "1e300", "NaN", "-1", "1" + "0" * 40])
def test_a_trace_time_no_calendar_holds_is_named_by_line_and_field(
    config: Path, tmp_path: Path, at: str
) -> None:
    trace = tmp_path / "t.jsonl"
    request = (
        '"model": "deepseek-chat", "api": "openai_chat", "input_tokens": 1, "output_tokens": 1'
    )
    trace.write_text(f'{{"at": 1767603600, {request}}}\n{{"at": {at}, {request}}}\n')
    code, stdout, stderr = _run("--config", str(config), "--trace", str(trace))
    said = " ".join(stderr.split())
    assert code == 2
    assert "Traceback" not in stderr + stdout
    assert f"{trace}:2: field 'at' must be a number of epoch seconds from 0 to" in said


def test_the_fallback_cooldown_is_a_flag(config: Path) -> None:
    def lag(seconds: str) -> int:
        code, stdout, _ = _run(
            "--config",
            str(config),
            "--synthetic",
            "steady",
            "--requests",
            "1500",
            "--policies",
            "fallback-429",
            "--fallback-cooldown",
            seconds,
            "--json",
        )
        assert code == 0
        figures = json.loads(stdout)["policies"][0]
        return int(figures["reentry_lag"]["total_requests"])

    assert lag("3600") > lag("60")


def test_a_missing_ledger_is_named(config: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "none.sqlite3"
    config.write_text(CONFIG + f"ledger: {{path: {ledger}}}\n")
    code, _, stderr = _run("--config", str(config), "--from-ledger")
    assert code == 2
    assert f"no ledger at {ledger}" in stderr


def test_the_ledger_is_replayed_between_since_and_until(config: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite3"
    writer = SqliteLedger(ledger)
    start = datetime(2026, 11, 2, 9, 0, tzinfo=UTC).timestamp()
    for minute in range(120):
        writer.record(
            request_record(
                request_id=f"r{minute}",
                started_at=start + 60 * minute,
                api="anthropic_messages",
                requested_model="auto/thrifty",
                usage=ReportedUsage(3_000, 400, 20_000, 0, 0),
            )
        )
    writer.close()
    config.write_text(CONFIG + f"ledger: {{path: {ledger}}}\n")
    code, stdout, stderr = _run(
        "--config",
        str(config),
        "--from-ledger",
        "--since",
        "2026-11-02T09:30",
        "--until",
        "2026-11-02T10:30",
        "--window",
        "plan:5h:5h:20:requests",
        "--policies",
        "ladder,always-key",
        "--json",
    )
    assert code == 0, stderr
    payload = json.loads(stdout)
    assert payload["trace"]["requests"] == 60
    assert payload["trace"]["source"] == f"ledger {ledger}"
    ladder = payload["policies"][0]
    assert ladder["per_rung"] == {"subscription": 20, "cheap": 40}
    assert ladder["paid_usd"] < payload["policies"][1]["paid_usd"]


# The command in a process of its own whose solver packages cannot be imported, as after a
# bare `pip install rungway`.
_WITHOUT_SOLVER = """
import sys
sys.modules["numpy"] = sys.modules["scipy"] = None
from rungway.cli.main import main
sys.argv = ["rungway", "whatif", *sys.argv[1:]]
main()
"""


def _bare(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_SOLVER, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_without_the_solver_the_default_policies_leave_the_oracle_out(config: Path) -> None:
    done = _bare("--config", str(config), "--synthetic", "steady", "--requests", "200", "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert [figure["policy"] for figure in payload["policies"]] == [
        "ladder",
        "always-key",
        "fallback-429",
        "ttl-180s",
    ]
    assert any("pip install 'rungway[whatif]'" in note for note in payload["notes"])


def test_without_the_solver_an_oracle_asked_for_is_one_line(config: Path) -> None:
    done = _bare("--config", str(config), "--synthetic", "steady", "--policies", "oracle")
    assert done.returncode == 2
    assert "pip install 'rungway[whatif]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_accounts_replays_a_plan_as_a_pool_under_the_pool_policies(config: Path) -> None:
    code, stdout, _ = _run(
        "--config",
        str(config),
        "--synthetic",
        "weekly-cap",
        "--requests",
        "800",
        "--accounts",
        "plan=3",
        "--window",
        "plan:5h:5h:0.5:cost",
        "--window",
        "plan:7d:7d:3:cost",
        "--json",
    )
    assert code == 0
    payload = json.loads(stdout)
    pools = {figure["policy"]: figure for figure in payload["pools"]}
    assert list(pools) == [
        "fill-first",
        "fill-first+affinity",
        "soonest-reset+affinity",
        "headroom+affinity",
        "expiry-first+affinity",
        "expiry-first+affinity+no-wait",
        "round-robin",
        "oracle",
    ]
    assert any(line.startswith("plan-3 7d: 3 cost") for line in payload["plans"])
    served = {figure["policy"]: figure["per_connection"] for figure in payload["policies"]}
    assert {"plan-1", "plan-2", "plan-3"} <= set(served["round-robin"])
    bound = pools["oracle"]["paid_usd"] / pools["oracle"]["ratio_to_bound"]
    for name, figure in pools.items():
        assert figure["resets"]["5h"] > 0, name
        assert 0 < figure["cache_hit_share"] < 1, name
        assert figure["paid_usd"] >= bound - 1e-9, f"{name} pays at least the oracle's bound"
    assert pools["round-robin"]["session_moves"] > pools["expiry-first+affinity"]["session_moves"]
    assert (
        pools["round-robin"]["cache_hit_share"] < pools["expiry-first+affinity"]["cache_hit_share"]
    )


@pytest.mark.parametrize(
    ("flag", "named"),
    [("plan", "write CONN=N"), ("plan=0", "1 to 64"), ("cheap=2", "not a plan connection")],
)
def test_a_bad_accounts_flag_gets_one_line(config: Path, flag: str, named: str) -> None:
    code, _, stderr = _run(
        "--config", str(config), "--synthetic", "steady", "--requests", "10", "--accounts", flag
    )
    assert code == 2
    assert named in stderr
    assert len(stderr.strip().splitlines()) == 1
