"""`rungway serve --workers N`: N gateway processes on one listening socket.

The parent binds the socket, prints the banner and forks the workers; each builds its own
gateway and serves on the inherited socket, and the kernel hands each new connection to
one of them. Workers share their live state, budgets and rate windows through Redis, so
the parent refuses to start more than one without it: with the embedded store each
worker would enforce every budget on its own, and N workers could spend N times it.

Each worker writes the shared SQLite ledger and keeps a money journal of its own
(`<ledger>.journal` for the first, `<ledger>.w<k>.journal` for the others), so a worker
that starts never replays a sibling's open reservations as crashed. A worker that dies
is started again; Ctrl-C or SIGTERM stops them all gracefully.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from rich.console import Console

from rungway.cluster.budget_changes import adopt_leftovers
from rungway.config import Settings
from rungway.ledger.journal import worker_journals
from rungway.ledger.sqlite import SqliteLedger

RESTART_PAUSE_S = 1.0
"""How long a worker that died waits before it is started again (a crash loop stays slow)."""
STOP_GRACE_S = 5.0
"""How long workers get to finish after SIGTERM before they are killed."""


def refuse_unshared(settings: Settings, workers: int) -> str | None:
    """Why `workers` processes cannot run with this config, or None when they can."""
    if workers <= 1 or settings.state.store == "redis":
        return None
    return (
        f"--workers {workers} needs a shared store: with the {settings.state.store} store "
        f"each worker would keep its own budgets and quota state, so {workers} workers "
        f"could spend {workers} times a budget.\n"
        "Set `state: {store: redis, redis: {url: redis://127.0.0.1:6379/0}}` in the config "
        "(README: Running more than one), or run one worker."
    )


def supervise(
    workers: int,
    serve_one: Callable[[int], None],
    *,
    sock: socket.socket,
    console: Console,
) -> int:
    """Fork `workers` processes running `serve_one(k)` on `sock`; restart any that dies
    until a signal asks all to stop. Returns the exit status for the command."""
    children: dict[int, int] = {}  # pid -> worker number
    stopping = False

    def start(worker: int) -> None:
        pid = os.fork()
        if pid == 0:
            # The child: default signal handling (uvicorn installs its own), then serve.
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            code = 0
            try:
                serve_one(worker)
            except BaseException:  # a worker's crash is reported, then it exits
                traceback.print_exc()
                code = 1
            finally:
                sys.stderr.flush()
                os._exit(code)
        children[pid] = worker

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        for worker in range(workers):
            start(worker)
        # The parent keeps the socket open: a worker started again needs it.
        return _wait(children, start, lambda: stopping, console)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _wait(
    children: dict[int, int],
    start: Callable[[int], None],
    stopping: Callable[[], bool],
    console: Console,
) -> int:
    deadline: float | None = None
    while children:
        if stopping() and deadline is None:
            deadline = time.monotonic() + STOP_GRACE_S
        if deadline is not None and time.monotonic() > deadline:
            for pid in children:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            time.sleep(0.05)
            continue
        worker = children.pop(pid)
        if stopping():
            continue
        code = os.waitstatus_to_exitcode(status)
        console.print(
            f"[bold red]rungway:[/] worker {worker} (pid {pid}) exited with status {code}; "
            f"starting it again in {RESTART_PAUSE_S:g}s",
            highlight=False,
        )
        time.sleep(RESTART_PAUSE_S)
        if not stopping():
            start(worker)
    return 0


def recover_journals(ledger: Path, *, keep: int) -> None:
    """Replay into the ledger the journals of workers numbered `keep` and up, which no
    worker of this run will open, then delete them."""
    for worker, path in sorted(worker_journals(ledger).items()):
        if worker < keep:
            continue
        SqliteLedger(ledger, worker=worker).close()
        for leftover in (path, *(path.with_name(path.name + end) for end in ("-wal", "-shm"))):
            leftover.unlink(missing_ok=True)
    # And the budget changes they left waiting for Redis go to the first worker's file.
    adopt_leftovers(ledger, keep=keep)
