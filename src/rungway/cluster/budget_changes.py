"""What a shared budget sends to Redis, and the file that keeps what waits for it.

A `Change` is one settle, release, cost without a hold, crash row or re-held hold, for the
accounts it names (`Target`: one account's keys in one budget period). The writer sends
changes from memory. While Redis does not answer, each change waiting is also written to
`PendingChanges`, a small SQLite file beside the ledger, and struck out once Redis has
taken it. A gateway that stops, or is killed, while Redis is away sends what the file
holds at its next start. Sending one twice is harmless: each change is counted once in
Redis by its hold's token, its request's marker or its crash row's marker.

Nothing is written while Redis answers: the request path does no file I/O for its budget.
Commits are not synced to the disk, as the money journal's are not: a killed process
loses nothing the operating system already holds.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Literal

from rungway.budget.local import Grouping

Kind = Literal["settle", "release", "spend", "recover", "rehold"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS changes (
    row INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    marker TEXT NOT NULL,
    member TEXT NOT NULL,
    targets TEXT NOT NULL,
    cost INTEGER NOT NULL,
    at REAL NOT NULL,
    seed TEXT NOT NULL
)
"""


@dataclass(frozen=True, slots=True)
class Target:
    """One account's keys for one budget period."""

    grouping: Grouping
    name: str
    start: float
    end: float
    spent: str
    holds: str
    reserved: str


@dataclass(slots=True)
class Change:
    """One change a budget sends to Redis."""

    seq: int
    kind: Kind
    marker: str
    """KEYS[1]: the hold's token, the request's marker (spend), any key (recover)."""
    member: str
    """The hold's `<id>:<amount>` member, or a crash row's marker field (recover)."""
    targets: tuple[Target, ...]
    cost: int
    at: float
    """When it was queued (a rehold: when its hold expires)."""
    seed: str = ""
    """The name of the seed its hold was taken in ('' when not known)."""
    row: int | None = None
    """Its row in `PendingChanges`, once written there."""


_SUFFIX = ".budget-queue"


def pending_path(journal: Path) -> Path:
    """Where the changes waiting for Redis are kept, beside the money journal at
    `journal` (one file per worker, as the journals are)."""
    return journal.with_name(journal.name.removesuffix(".journal") + _SUFFIX)


def adopt_leftovers(ledger: Path, *, keep: int) -> None:
    """Move the changes that workers numbered `keep` and up left waiting (no worker of
    this run opens their files) into the first worker's file, which sends them."""
    for path in sorted(ledger.parent.glob(f"{ledger.name}.w*{_SUFFIX}")):
        number = path.name.removeprefix(f"{ledger.name}.w").removesuffix(_SUFFIX)
        if not number.isdigit() or int(number) < keep:
            continue
        first = PendingChanges(ledger.with_name(ledger.name + _SUFFIX))
        try:
            first.adopt(path)
        finally:
            first.close()
        for leftover in (path, *(path.with_name(path.name + end) for end in ("-wal", "-shm"))):
            leftover.unlink(missing_ok=True)


class PendingChanges:
    """The changes that wait for Redis, on disk."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        # Opened where the gateway is built; used only on its event loop thereafter.
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute(_SCHEMA)

    def save(self, changes: Iterable[Change]) -> None:
        """Write down each change not yet written (a rehold never is: only its own process
        can hold it again, and a new process has other holds)."""
        db = self._db
        db.execute("BEGIN")
        try:
            for change in changes:
                if change.row is not None or change.kind == "rehold":
                    continue
                targets = json.dumps([astuple(target) for target in change.targets])
                cursor = db.execute(
                    "INSERT INTO changes (kind, marker, member, targets, cost, at, seed) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        change.kind,
                        change.marker,
                        change.member,
                        targets,
                        change.cost,
                        change.at,
                        change.seed,
                    ),
                )
                change.row = cursor.lastrowid
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def forget(self, rows: list[int]) -> None:
        """Strike out changes Redis has taken."""
        self._db.executemany("DELETE FROM changes WHERE row = ?", [(row,) for row in rows])

    def load(self) -> list[Change]:
        """Every change written down and not struck out, oldest first (`seq` is 0: the
        writer numbers them as it queues them)."""
        rows = self._db.execute(
            "SELECT row, kind, marker, member, targets, cost, at, seed FROM changes ORDER BY row"
        ).fetchall()
        return [
            Change(
                0,
                kind,
                marker,
                member,
                tuple(Target(*fields) for fields in json.loads(targets)),
                cost,
                at,
                seed,
                row,
            )
            for row, kind, marker, member, targets, cost, at, seed in rows
        ]

    def adopt(self, other: Path) -> None:
        """Take in every change the file at `other` holds."""
        columns = "kind, marker, member, targets, cost, at, seed"
        self._db.execute("ATTACH DATABASE ? AS other", (str(other),))
        try:
            self._db.execute(_SCHEMA.replace("EXISTS ", "EXISTS other."))
            self._db.execute(
                f"INSERT INTO changes ({columns}) SELECT {columns} FROM other.changes ORDER BY row"
            )
        finally:
            self._db.execute("DETACH DATABASE other")

    def close(self) -> None:
        """Close the file (what it holds stays for the next start)."""
        self._db.close()
