"""The file of budget changes waiting for Redis: what is written is read back as it was,
struck out once taken, and a worker's leftovers move to the first worker's file."""

from __future__ import annotations

from pathlib import Path

from rungway.cluster.budget_changes import (
    Change,
    PendingChanges,
    Target,
    adopt_leftovers,
    pending_path,
)

CHEAP = Target("rung", "cheap", 1.0, 2.0, "p:spent", "p:holds", "p:reserved")
ALICE = Target("key", "alice", 1.5, 2.5, "p:spent:k", "p:holds:k", "p:reserved:k")


def _change(kind: str = "settle", cost: int = 250) -> Change:
    return Change(7, kind, "p:budget:hold:9", "9:300", (CHEAP, ALICE), cost, 123.25, "ab12")  # type: ignore[arg-type]


def test_changes_are_read_back_as_written_and_struck_out_once_taken(tmp_path: Path) -> None:
    path = pending_path(tmp_path / "ledger.sqlite3.w2.journal")
    assert path.name == "ledger.sqlite3.w2.budget-queue"
    written = [_change(), _change("release", 0), _change("rehold", 0)]
    pending = PendingChanges(path)
    pending.save(written)
    pending.save(written)  # once on disk, not again
    assert [each.row for each in written] == [1, 2, None], "a rehold is never written"
    pending.close()

    again = PendingChanges(path)
    read = again.load()
    assert [(each.kind, each.targets, each.cost, each.at, each.seed) for each in read] == [
        ("settle", (CHEAP, ALICE), 250, 123.25, "ab12"),
        ("release", (CHEAP, ALICE), 0, 123.25, "ab12"),
    ]
    again.forget([1])
    assert [each.kind for each in again.load()] == ["release"]
    again.close()


def test_the_changes_of_workers_no_longer_started_go_to_the_first_workers_file(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger.sqlite3"
    for worker in (1, 3):
        pending = PendingChanges(pending_path(tmp_path / f"ledger.sqlite3.w{worker}.journal"))
        pending.save([_change(cost=worker)])
        pending.close()

    adopt_leftovers(ledger, keep=2)  # worker 1 still runs; worker 3 does not

    first = PendingChanges(pending_path(tmp_path / "ledger.sqlite3.journal"))
    assert [each.cost for each in first.load()] == [3]
    first.close()
    assert not (tmp_path / "ledger.sqlite3.w3.budget-queue").exists()
    assert (tmp_path / "ledger.sqlite3.w1.budget-queue").exists()
