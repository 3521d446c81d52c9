"""`rungway serve` imports only what serving uses: a lone gateway loads no cluster client,
no simulated upstream and no replay, so it starts sooner and idles in less memory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SERVING_NEEDS_NONE_OF = (
    "aiohttp",
    "redis",
    "asyncpg",
    "cryptography",
    "rungway.sim",
    "rungway.whatif",
    "rungway.cli.whatif",
    "rungway.cli.demo",
    "rungway.cli.sim_upstream",
    "scipy",
    "numpy",
    "matplotlib",
)
"""Modules only a cluster (`state.store: redis`, `ledger.postgres`), a credential store,
a token renewal, `demo`, `sim-upstream` or `whatif` needs."""

# `rungway serve` run as the command line runs it, up to the point where it would start
# serving: the gateway is built, the banner shown; then the modules loaded are printed.
SERVE_UNTIL_READY = """
import json, sys
import uvicorn

def report(self, sockets=None):
    print(json.dumps(sorted(sys.modules)))

uvicorn.Server.run = report
sys.argv = ["rungway", "serve", "--config", sys.argv[1], "--port", "0"]
from rungway.cli.main import main
main()
"""


def _loaded(argv: list[str], cwd: Path) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", *argv],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def _unwanted(loaded: set[str]) -> list[str]:
    return sorted(
        name
        for name in loaded
        if any(name == top or name.startswith(f"{top}.") for top in SERVING_NEEDS_NONE_OF)
    )


def test_a_lone_gateway_serves_without_cluster_sim_or_replay_modules(tmp_path: Path) -> None:
    secret = tmp_path / "cheap.secret"
    secret.write_text("sk-cheap")
    config = tmp_path / "rungway.yaml"
    config.write_text(
        f"ledger: {{path: {tmp_path / 'ledger.sqlite3'}}}\n"
        "client_keys:\n"
        f"  - {{name: app, key: {{file: {secret}}}, budget_usd: 5, requests_per_minute: 60}}\n"
        "connections:\n"
        "  - {id: cheap, provider: deepseek, auth: apikey, base_url: 'http://127.0.0.1:9/v1',\n"
        f"      credential: {{file: {secret}}}, models: [deepseek-chat]}}\n"
    )
    loaded = _loaded([SERVE_UNTIL_READY, str(config)], tmp_path)
    # The report ran after the gateway was built, so this is what a serving process holds.
    assert "rungway.app" in loaded
    assert _unwanted(loaded) == []


def test_serve_help_loads_no_other_commands_modules(tmp_path: Path) -> None:
    show_help = (
        "import json, sys\n"
        "sys.argv = ['rungway', 'serve', '--help']\n"
        "from rungway.cli.main import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    assert _unwanted(_loaded([show_help], tmp_path)) == []
