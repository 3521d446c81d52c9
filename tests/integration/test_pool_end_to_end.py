"""End to end: a pool of three Claude plan accounts behind `auto/thrifty`, driven by thirty
coding-agent sessions from the official `anthropic` SDK (`pool_world.py`), against what
`rungway whatif --from-ledger` predicts for the same traffic with the same config.

One run (some fifteen to thirty seconds) serves every test here: the pool spreads by the
default strategy and pays only past it, every session stays on its account until that
account cannot serve it, and the paid spend, the quota left unused at resets and the
cache-hit share are within 5% of the what-if replay of the run's own ledger (its session
moves within 25%).
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from rungway.routing.settings import LadderSettings
from tests.integration.pool_world import (
    CAPACITY,
    WINDOW_S,
    PoolRun,
    pool_run,
    settings_document,
)

pytestmark = pytest.mark.slow

POLICY = f"{LadderSettings().pool_strategy.replace('_', '-')}+affinity+no-wait"
"""The what-if pool policy the gateway's ladder is: the default pool strategy, session
affinity, and no waits for a reset (`max_wait_s: 0`)."""
MUST_MOVE = {"quota_exhausted", "quota_below_reentry", "cooldown", "breaker_open"}
"""The skip reasons that say an account could not serve a session's turn."""


@dataclass(frozen=True)
class Prediction:
    """What `rungway whatif --from-ledger` said of the run, under the policy the config is
    (`POLICY`: its planner, pool order, pins and prompt cache)."""

    figures: dict[str, Any]
    """Its figures: paid spend, requests per connection, ..."""
    pool: dict[str, Any]
    """Its pool figures: unused quota at resets, cache-hit share, session moves."""


@dataclass(frozen=True)
class Observed:
    """What the run did, counted as `whatif/pool_metrics.py` counts a replay."""

    paid_usd: float
    per_connection: Counter[str]
    cache_hit_share: float
    unused_windows: float
    """Window-equivalents left unused at the resets within the run."""
    session_moves: int


@dataclass(frozen=True)
class Run:
    """The run, what it did, and what what-if predicted for it."""

    world: PoolRun
    observed: Observed
    predicted: Prediction


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    folder = tmp_path_factory.mktemp("pool-e2e")
    with pool_run(folder) as world:
        observed = _observed(world)
        predicted = _whatif(world)
        figures = {"observed": observed, "predicted": predicted}
        # The figures, for the closing note of a change to the pools (pytest -s shows it).
        print(json.dumps(figures, indent=2, default=lambda value: value.__dict__))
        yield Run(world, observed, predicted)


def test_the_pool_spreads_by_the_default_strategy_and_pays_only_past_it(run: Run) -> None:
    world, served = run.world, run.observed.per_connection
    assert all(served[account] > 0 for account in world.accounts), served
    assert served["paid"] > 0, "the pool runs out within the run, and the paid rung serves"
    # Which account served how much is what the config's planner, replayed with its
    # default pool strategy and session pins, puts on each.
    predicted = run.predicted.figures["per_connection"]
    for connection in [*world.accounts, "paid"]:
        # Two requests either way for an account that served few: one admitted just as its
        # window reset may land on either side of the reset.
        expected = pytest.approx(predicted[connection], rel=0.05, abs=2)
        assert served[connection] == expected, connection
    # A turn is paid for only when every account of the pool was spent or resting.
    for row in world.rows.values():
        if row["connection_id"] == "paid":
            unable = {account for account in world.accounts if _why_not(row, account)}
            assert unable == set(world.accounts), row["plan"]


def test_every_session_stays_on_its_account_until_it_must_move(run: Run) -> None:
    moves = list(_moves(run.world))
    assert any(move.to in run.world.accounts for move in moves), "sessions move when spent"
    unjustified = [move for move in moves if move.evidence is None]
    assert not unjustified, unjustified[:5]


def test_whatif_predicts_the_paid_spend(run: Run) -> None:
    # The replay prices each turn where it places it, through its prompt cache.
    assert run.predicted.pool["paid_usd"] == pytest.approx(run.observed.paid_usd, rel=0.05)


def test_whatif_predicts_the_quota_left_unused_at_resets(run: Run) -> None:
    observed = run.observed.unused_windows
    assert observed > 0, "the quiet spell leaves quota unused at a reset"
    assert run.predicted.pool["unused_windows"]["5h"] == pytest.approx(observed, rel=0.05)


def test_whatif_predicts_the_session_moves(run: Run) -> None:
    # Looser than the others: when several turns arrive together at an account with a few
    # requests left, the gateway gives them to whichever reaches the sim first, the replay
    # to the first in the ledger, and each turn that differs moves its session twice.
    observed = run.observed.session_moves
    assert run.predicted.pool["session_moves"] == pytest.approx(observed, rel=0.25)


def test_whatif_predicts_the_cache_hit_share(run: Run) -> None:
    observed = run.observed.cache_hit_share
    assert observed > 0.5, "the agents' turns read their prompt cache"
    assert run.predicted.pool["cache_hit_share"] == pytest.approx(observed, rel=0.05)


@dataclass(frozen=True)
class Move:
    """A turn served elsewhere than the account the session was last served by."""

    session: int
    turn: int
    left: str
    to: str
    evidence: str | None
    """What in the turn's ledger row shows `left` could not serve it (None: nothing)."""


def _moves(world: PoolRun) -> Iterator[Move]:
    for session in world.sessions:
        pinned: str | None = None
        for turn in session.turns:
            row = world.row(turn)
            served = row["connection_id"]
            if pinned is not None and served != pinned:
                yield Move(session.number, turn.index, pinned, served, _why_not(row, pinned))
            if served in world.accounts:
                pinned = served


def _why_not(row: dict[str, Any], account: str) -> str | None:
    """What in a turn's ledger row shows `account` could not serve it, if anything."""
    for attempt in row["attempts"]:
        if attempt["connection_id"] == account and attempt["outcome"] == "quota_exhausted":
            return f"attempt {attempt['outcome']}"
    for skip in row["plan"]["skipped"]:
        if skip.get("connection") == account and skip["reason"] in MUST_MOVE:
            return f"skipped {skip['reason']}"
    return None


def _observed(world: PoolRun) -> Observed:
    served = [row for row in world.rows.values() if row["connection_id"] is not None]
    inputs = sum(
        row["input_tokens"] + row["cache_read_tokens"] + row["cache_write_tokens"] for row in served
    )
    first = min(row["started_at"] for row in served)
    last = max(row["started_at"] for row in served)
    # At each reset within the run, the share of its capacity the ending window left.
    unused = 0.0
    for account in world.pool:
        name = account.scenario.name
        times = [row["started_at"] for row in served if row["connection_id"] == name]
        reset = account.state().window("5h").reset_at
        while reset > first:
            reset -= WINDOW_S
        while (reset := reset + WINDOW_S) <= last:
            used = sum(reset - WINDOW_S <= at < reset for at in times)
            unused += max(0.0, 1.0 - used / CAPACITY)
    moves = 0
    for session in world.sessions:
        connections = [world.row(turn)["connection_id"] for turn in session.turns]
        moves += sum(before != after for before, after in itertools.pairwise(connections))
    return Observed(
        paid_usd=math.fsum(row["cost_usd"] for row in served),
        per_connection=Counter(row["connection_id"] for row in served),
        cache_hit_share=sum(row["cache_read_tokens"] for row in served) / inputs,
        unused_windows=unused,
        session_moves=moves,
    )


def _whatif(world: PoolRun) -> Prediction:
    config = world.folder / "whatif.yaml"
    document = settings_document(world.connections, world.ledger)
    config.write_text(yaml.safe_dump(document, sort_keys=False))
    windows = []
    for account in world.pool:
        # The sim's window runs on a grid of its length through its next reset.
        anchor = account.state().window("5h").reset_at - WINDOW_S
        flag = f"{account.scenario.name}:5h:{WINDOW_S}:{CAPACITY}:requests:fixed@{anchor!r}"
        windows += ["--window", flag]
    command = [sys.executable, "-m", "rungway", "whatif", "--config", str(config)]
    command += ["--from-ledger", "--policies", POLICY, "--json", *windows]
    # Beside the ledger and the config, to run again by hand.
    (world.folder / "whatif.cmd").write_text(json.dumps(command))
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    (figures,) = payload["policies"]
    (pool,) = payload["pools"]
    assert figures["policy"] == pool["policy"] == POLICY
    return Prediction(figures, pool)
