"""Plans' terms as data: every plan states them, and a plan serves only the clients they
allow unless the operator widened its connection, or another key than the one it is bound to."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from rungway import app
from rungway.pricing import Tier
from rungway.protocol.clients import CLAUDE_CODE, GEMINI_CLI, KNOWN_CLIENTS, recognise_client
from rungway.routing.autoid import parse_auto_id
from rungway.routing.billing import BillingClass, Catalog, CatalogEntry, Overage
from rungway.routing.ladder import RouteRequest, plan_route
from rungway.routing.named import gate_named
from rungway.routing.plan import Candidate, RoutePlan, SkipReason
from rungway.routing.rungs import Rung
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import Roster, RosterConnection, Snapshot
from rungway.routing.terms import ConnectionTerms, RequestClient, TermsGate, parse_terms

from .builders import OTHER_API, connection
from .test_billing import builtin_rows

# What Claude Code 2.1.332 (`claude -p`) sent through the gateway, captured from
# tests/clients/test_claude_code.py (the oauth beta is the gateway's own addition).
CLAUDE_CODE_SENT = {
    "user-agent": "claude-cli/2.1.332 (external, sdk-cli)",
    "x-app": "cli",
    "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,"
    "context-management-2025-06-27,effort-2025-11-24",
    "anthropic-version": "2023-06-01",
    "x-stainless-lang": "js",
}
ANTHROPIC_SDK_SENT = {"user-agent": "Anthropic/Python 0.75.0", "anthropic-version": "2023-06-01"}
SETTINGS = LadderSettings()


def test_every_plan_entry_of_the_built_in_catalog_states_its_terms() -> None:
    for row in builtin_rows():
        if row["billing"] == "subscription":
            assert "terms" in row, f"{row['provider']}+{row.get('auth')} states no terms"
    for entry in app.builtin_catalog():
        if entry.billing is BillingClass.SUBSCRIPTION:
            assert entry.terms is not None
            assert entry.terms.page.startswith("https://")
            assert len(entry.terms.says.split()) >= 15, entry.terms.says


def test_a_claude_plan_serves_claude_code_only_and_says_so() -> None:
    terms = Catalog(app.builtin_catalog()).terms("anthropic", "oauth")
    assert terms is not None
    assert terms.clients == frozenset({CLAUDE_CODE})
    assert terms.one_person
    assert terms.rule == "claude plans serve Claude Code only"
    assert Catalog(app.builtin_catalog()).terms("anthropic", "apikey") is None


def test_an_operator_billing_entry_keeps_the_plans_terms() -> None:
    operator = CatalogEntry(
        "anthropic", "oauth", BillingClass.SUBSCRIPTION, Overage.METERS_TO_PAID, "mine", "config"
    )
    catalog = Catalog([operator, *app.builtin_catalog()])
    terms = catalog.terms("anthropic", "oauth")
    assert terms is not None
    assert terms.clients == frozenset({CLAUDE_CODE})


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"clients": ["cursor"]}, "terms.clients"),
        ({"clients": []}, "terms.clients"),
        ({"read": "4 Dec 2026"}, "terms.read"),
        ({"page": "http://example.com"}, "terms.page"),
        ({"one_person": "yes"}, "terms.one_person"),
        ({"rule": ""}, "terms.rule"),
        ({"extra": 1}, "unknown"),
    ],
)
def test_terms_that_are_not_well_formed_name_the_field(
    change: dict[str, Any], problem: str
) -> None:
    raw = {
        "page": "https://example.com/terms",
        "read": "2026-12-04",
        "clients": [CLAUDE_CODE],
        "says": "only the one client",
        "one_person": True,
        "rule": "x serves y only",
        **change,
    }
    with pytest.raises(ValueError, match=problem):
        parse_terms(raw, KNOWN_CLIENTS)


def test_claude_code_is_recognised_by_its_user_agent_x_app_and_beta_flag() -> None:
    assert recognise_client(CLAUDE_CODE_SENT) == CLAUDE_CODE
    interactive = {**CLAUDE_CODE_SENT, "user-agent": "claude-cli/2.1.220 (external, cli)"}
    assert recognise_client(interactive) == CLAUDE_CODE


@pytest.mark.parametrize(
    "sent",
    [
        ANTHROPIC_SDK_SENT,
        {},
        # One or two of the three are not Claude Code.
        {**CLAUDE_CODE_SENT, "x-app": "web"},
        {k: v for k, v in CLAUDE_CODE_SENT.items() if k != "x-app"},
        {**CLAUDE_CODE_SENT, "anthropic-beta": "oauth-2025-04-20"},
        {**CLAUDE_CODE_SENT, "user-agent": "Anthropic/Python 0.75.0"},
        {**CLAUDE_CODE_SENT, "user-agent": "claude-cli/2.1.332"},
        # The Agent SDK drives the CLI but is named apart by the terms.
        {**CLAUDE_CODE_SENT, "user-agent": "claude-cli/2.1.332 (external, sdk-ts)"},
        {**CLAUDE_CODE_SENT, "user-agent": "claude-cli/2.1.332 (external, sdk-py, agent-sdk/0.2)"},
    ],
)
def test_a_request_without_all_of_claude_codes_identity_is_not_claude_code(
    sent: dict[str, str],
) -> None:
    assert recognise_client(sent) is None


def test_the_gemini_cli_is_recognised_by_its_user_agent() -> None:
    sent = {"user-agent": "GeminiCLI-tui/0.61.0/gemini-2.5-flash (linux; x64; terminal)"}
    assert recognise_client(sent) == GEMINI_CLI


BUILT_IN = Catalog(app.builtin_catalog())


def _claude_plan(**config: Any) -> RosterConnection:
    plan = connection(
        "claude-plan", "anthropic", "oauth", ["claude-sonnet-4-5"], api=OTHER_API, catalog=BUILT_IN
    )
    return replace(plan, terms=ConnectionTerms(BUILT_IN.terms("anthropic", "oauth"), **config))


def _api_key() -> RosterConnection:
    return connection(
        "claude-api",
        "anthropic",
        "apikey",
        {"claude-sonnet-4-5": Tier.PREMIUM},
        api=OTHER_API,
        prices={"claude-sonnet-4-5": 3.0},
        catalog=BUILT_IN,
    )


def _plan(roster: Roster, ladder: str, client: RequestClient) -> RoutePlan:
    request = RouteRequest(ladder, parse_auto_id(ladder), "anthropic_messages", client=client)
    settings = LadderSettings(rung_budget_usd={"premium": None})
    return plan_route(request, settings, Snapshot(roster), 0.0)


def _served_by(plan: RoutePlan) -> list[str]:
    return [cid for candidate in plan.candidates for cid in candidate.connection_ids]


def test_another_clients_request_skips_a_claude_plan_with_the_terms_reason() -> None:
    roster = Roster([_claude_plan(), _api_key()])

    plan = _plan(roster, "auto/thrifty", RequestClient(None, None))

    assert _served_by(plan) == ["claude-api"]
    (skip,) = [s for s in plan.skipped if s.connection_id == "claude-plan"]
    assert (skip.reason, skip.detail) == (
        SkipReason.TERMS,
        "terms: claude plans serve Claude Code only",
    )
    assert skip.rung is Rung.SUBSCRIPTION
    assert plan.to_json()["skipped"][0]["reason"] == "terms"
    assert _served_by(_plan(roster, "auto/thrifty", RequestClient(CLAUDE_CODE))) == [
        "claude-plan",
        "claude-api",
    ]


def test_under_auto_subscription_another_client_gets_no_plan_and_the_reason() -> None:
    plan = _plan(Roster([_claude_plan(), _api_key()]), "auto/subscription", RequestClient())

    assert plan.candidates == ()
    assert [s.reason for s in plan.skipped if s.connection_id == "claude-plan"] == [
        SkipReason.TERMS
    ]


def test_a_widened_claude_plan_serves_any_client() -> None:
    roster = Roster([_claude_plan(widened=True), _api_key()])
    assert _served_by(_plan(roster, "auto/thrifty", RequestClient())) == [
        "claude-plan",
        "claude-api",
    ]


def test_a_plan_bound_to_a_client_key_serves_only_that_key() -> None:
    roster = Roster([_claude_plan(widened=True, client_key="me"), _api_key()])

    assert _served_by(_plan(roster, "auto/thrifty", RequestClient(None, "me")))[0] == "claude-plan"
    plan = _plan(roster, "auto/thrifty", RequestClient(CLAUDE_CODE, "colleague"))
    assert _served_by(plan) == ["claude-api"]
    (skip,) = [s for s in plan.skipped if s.connection_id == "claude-plan"]
    assert skip.reason is SkipReason.CLIENT_KEY


def test_a_named_model_skips_a_plan_its_client_may_not_use() -> None:
    roster = Roster([_claude_plan(), _api_key()])
    named = RoutePlan(
        "claude-sonnet-4-5",
        None,
        None,
        (
            Candidate("anthropic", "claude-sonnet-4-5", Rung.SUBSCRIPTION, ("claude-plan",)),
            Candidate("anthropic", "claude-sonnet-4-5", Rung.PREMIUM, ("claude-api",)),
        ),
        (),
    )
    gate = TermsGate(roster.connections.values())

    assert gate_named(named, {}, 0.0, gate.skips(RequestClient(CLAUDE_CODE))) is named
    gated = gate_named(named, {}, 0.0, gate.skips(RequestClient()))

    assert [c.connection_ids for c in gated.candidates] == [("claude-api",)]
    (skip,) = gated.skipped
    assert (skip.reason, skip.connection_id, skip.model) == (
        SkipReason.TERMS,
        "claude-plan",
        "claude-sonnet-4-5",
    )


def test_a_request_the_ladder_is_not_told_the_client_of_keeps_every_plan() -> None:
    # A what-if replay says nothing of clients: it assumes the traffic each plan allows.
    request = RouteRequest("auto/thrifty", parse_auto_id("auto/thrifty"), "anthropic_messages")
    plan = plan_route(request, SETTINGS, Snapshot(Roster([_claude_plan()])), 0.0)
    assert _served_by(plan) == ["claude-plan"]
