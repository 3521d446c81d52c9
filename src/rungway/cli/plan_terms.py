"""What the banner and `rungway doctor` say of each plan connection's terms.

A connection whose plan's terms restrict its clients says which clients it serves and where
the terms are written; one the operator widened (`clients: any`) says so, with the terms it
goes past; a plan for one person served to several client keys, and not bound to one
(`client_key:`), draws a warning.
"""

from __future__ import annotations

from rungway.cli.findings import Finding, Level
from rungway.protocol.clients import KNOWN_CLIENTS
from rungway.routing.snapshot import Roster


def terms_facts(roster: Roster, client_keys: int) -> dict[str, dict[str, str | None]]:
    """Per connection with terms or a choice of its operator: its note and any warning."""
    facts: dict[str, dict[str, str | None]] = {}
    for connection in roster.connections.values():
        view = connection.terms.to_json(KNOWN_CLIENTS, client_keys)
        if view is not None:
            facts[connection.id] = {
                "note": str(view["note"]),
                "warning": connection.terms.shared_warning(client_keys),
            }
    return facts


def terms_findings(roster: Roster, client_keys: int) -> list[Finding]:
    """One finding per connection with terms: OK when kept to them, WARN when widened past
    them or when one person's plan serves several client keys."""
    findings = []
    for connection in roster.connections.values():
        rules = connection.terms
        view = rules.to_json(KNOWN_CLIENTS, client_keys)
        if view is None:
            continue
        subject = f"terms {connection.id}"
        note = str(view["note"])
        warning = rules.shared_warning(client_keys)
        if warning is not None:
            fix = "add `client_key: NAME` to the connection, or give each person a plan"
            findings.append(Finding(Level.WARN, subject, f"{note}; {warning}", fix))
        elif rules.widened and rules.terms is not None and rules.terms.clients is not None:
            fix = "remove `clients: any` unless you have read its terms and mean it"
            findings.append(Finding(Level.WARN, subject, note, fix))
        else:
            findings.append(Finding(Level.OK, subject, note))
    return findings
