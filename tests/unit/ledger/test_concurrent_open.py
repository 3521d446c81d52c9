"""Processes that open a new ledger at the same moment, as the workers of `serve --workers`
do, all start: none finds the schema half-made and fails migrating it again."""

from __future__ import annotations

import multiprocessing
import sqlite3
import traceback
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from rungway.ledger.sqlite import SCHEMA_VERSION, SqliteLedger

PROCESSES = 4
ROUNDS = 30


def _round(folder: Path, number: int) -> Path:
    return folder / f"round{number}" / "ledger.sqlite3"


def _open_each_round(folder: Path, worker: int, barrier: Barrier, failures: Any) -> None:
    for number in range(ROUNDS):
        barrier.wait(timeout=30)
        # Every other round with the outbox PostgreSQL drains; every third with one
        # journal for all, as two gateways on one ledger have.
        outbox = number % 2 == 1
        journal = 0 if number % 3 == 2 else worker
        try:
            SqliteLedger(_round(folder, number), worker=journal, outbox=outbox).close()
        except Exception:
            failures.put(f"round {number}, process {worker}:\n{traceback.format_exc()}")


def test_processes_opening_a_new_ledger_at_once_all_start(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PROCESSES)
    failures = context.Queue()
    processes = [
        context.Process(target=_open_each_round, args=(tmp_path, worker, barrier, failures))
        for worker in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    found = []
    while not failures.empty():
        found.append(failures.get())
    assert not found, "\n".join(found)
    assert [process.exitcode for process in processes] == [0] * PROCESSES
    for number in range(ROUNDS):
        db = sqlite3.connect(_round(tmp_path, number))
        try:
            assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
            columns = [row[1] for row in db.execute("PRAGMA table_info(requests)")]
            assert columns[-2:] == ["cost_usd", "list_cost_usd"]
            assert len(columns) == len(set(columns))
        finally:
            db.close()
