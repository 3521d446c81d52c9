"""The pools view: which connections form a pool, and what an account shows."""

from __future__ import annotations

import asyncio
from typing import Any

from rungway.app import build_roster
from rungway.config import parse_settings
from rungway.ledger.report import LedgerUnavailable, SpendReport
from rungway.quota.burn import BurnBook
from rungway.routing.snapshot import ConnectionState, QuotaWindow, Roster, WindowStatus
from rungway.server.pools import PoolsView, pools_of

NOW = 1_790_000_000.0


def _roster(*connections: tuple[str, str, str], owners: dict[str, str] | None = None) -> Roster:
    document: dict[str, Any] = {
        "connections": [
            {
                "id": name,
                "provider": provider,
                "auth": auth,
                "credential": {"env": "UNUSED"},
                "models": ["claude-sonnet-4-5" if provider == "anthropic" else "gpt-5"],
                **({"owner": owners[name]} if owners and name in owners else {}),
            }
            for name, provider, auth in connections
        ]
    }
    return build_roster(parse_settings(document))


class _Ledger:
    def __init__(self, fails: bool = False) -> None:
        self.fails = fails
        self.asked = 0

    def spend_report(self, since: float, until: float, by: str) -> SpendReport:
        self.asked += 1
        if self.fails:
            raise LedgerUnavailable("postgres: connection refused")
        assert by == "connection"
        return SpendReport(since, until, "connection", ())


class _Pins:
    def pinned_counts(self, now: float | None = None) -> dict[str, int]:
        assert now == NOW, "counted at the gateway's now, so expired pins are left out"
        return {"a": 2}


def test_plans_of_one_provider_and_billing_entry_form_one_pool_and_keys_none() -> None:
    roster = _roster(
        ("a", "anthropic", "oauth"),
        ("key", "anthropic", "apikey"),
        ("b", "anthropic", "oauth"),
        ("codex", "codex", "oauth"),
    )
    pools = pools_of(roster)
    assert {key.label: [c.id for c in members] for key, members in pools.items()} == {
        "anthropic": ["a", "b"],
        "codex": ["codex"],
    }


def test_a_pool_never_mixes_owners() -> None:
    roster = _roster(
        ("a", "anthropic", "oauth"),
        ("b", "anthropic", "oauth"),
        ("c", "anthropic", "oauth"),
        ("d", "anthropic", "oauth"),
        owners={"a": "ana", "b": "ben", "c": "ana"},
    )
    pools = pools_of(roster)
    assert {key.label: [c.id for c in members] for key, members in pools.items()} == {
        "anthropic/ana": ["a", "c"],
        "anthropic/ben": ["b"],
        "anthropic": ["d"],
    }
    body = asyncio.run(
        PoolsView(roster=roster, ledger=_Ledger(), burn=BurnBook, pins=lambda: None).body({}, NOW)
    )
    assert [(pool["pool"], pool["owner"]) for pool in body["pools"]] == [
        ("anthropic/ana", "ana"),
        ("anthropic/ben", "ben"),
        ("anthropic", None),
    ]


def test_an_unanswering_ledger_leaves_the_cache_share_unknown_not_the_view() -> None:
    roster = _roster(("a", "anthropic", "oauth"), ("b", "anthropic", "oauth"))
    ledger = _Ledger(fails=True)
    view = PoolsView(roster=roster, ledger=ledger, burn=lambda: None, pins=_Pins)
    refused = QuotaWindow("5h", None, NOW + 600, NOW - 5, status=WindowStatus.REJECTED)
    states = {"a": ConnectionState(windows=(refused,))}
    body = asyncio.run(view.body(states, NOW))
    assert ledger.asked == 1
    (pool,) = body["pools"]
    first, second = pool["accounts"]
    assert first["cache_hit_share"] is None
    assert (first["pinned_sessions"], second["pinned_sessions"]) == (2, 0)
    # A refusal with no share: spent until its reset, and that binds the account.
    assert first["binding"] == {
        "window": "5h",
        "model": None,
        "outlook": "exhausted",
        "at": NOW + 600,
    }
    assert second["windows"] == []
    assert second["binding"] is None


def test_without_plans_the_ledger_is_not_read() -> None:
    ledger = _Ledger()
    view = PoolsView(
        roster=_roster(("key", "anthropic", "apikey")),
        ledger=ledger,
        burn=BurnBook,
        pins=lambda: None,
    )
    body = asyncio.run(view.body({}, NOW))
    assert (body["pools"], body["pinning"], ledger.asked) == ([], False, 0)
