"""A gateway whose ledger writer has stopped says so instead of hanging or saying ok.

Nothing a row holds stops the writer any more (see tests/unit/ledger/test_writer.py), so
the writer is made to stop here by a value whose adaptation for SQLite raises SystemExit.
`/healthz` then answers 503 `failing`, `/readyz` 503 naming the ledger, and the admin API's
ledger reads 503 `ledger_unavailable` at once.
"""

from __future__ import annotations

import time

import httpx

from rungway.ledger.journal import UNRECORDED
from tests.integration.conftest import StartGateway
from tests.records import request_record


class _Exits:
    """A value whose adaptation for SQLite ends the thread that writes it."""

    def __conform__(self, protocol: object) -> object:
        raise SystemExit("the writer is made to stop")


def test_a_stopped_ledger_writer_fails_health_and_readiness_and_admin_reads_fail_fast(
    start_gateway: StartGateway,
) -> None:
    gateway = start_gateway()
    assert httpx.get(f"{gateway.url}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{gateway.url}/readyz")
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})

    gateway.ledger.record(request_record(request_id=UNRECORDED, client_key=_Exits()))
    deadline = time.monotonic() + 5
    while gateway.ledger.stopped_writer() is None:
        assert time.monotonic() < deadline, "the writer never stopped"
        time.sleep(0.01)

    health = httpx.get(f"{gateway.url}/healthz", timeout=2)
    assert health.status_code == 503
    assert health.json()["status"] == "failing"
    assert "SystemExit" in health.json()["ledger"]
    ready = httpx.get(f"{gateway.url}/readyz", timeout=2)
    assert ready.status_code == 503
    [down] = ready.json()["down"]
    assert down["component"] == "ledger"
    assert "ledger writer has stopped" in down["detail"]
    for path in ("/admin/requests", "/admin/spend", "/admin/requests/abc"):
        started = time.monotonic()
        answer = httpx.get(f"{gateway.url}{path}", timeout=5)
        assert answer.status_code == 503, path
        assert answer.json()["error"]["type"] == "ledger_unavailable"
        assert time.monotonic() - started < 2
