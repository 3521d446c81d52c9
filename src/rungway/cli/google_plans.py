"""What `doctor` says of a Google plan connection: Code Assist retired, and an Antigravity
login's terms and credits."""

from __future__ import annotations

from rungway.cli.findings import Finding, Level
from rungway.config import ConnectionConfig
from rungway.routing.retired import RETIRED


def google_plan_findings(subject: str, connection: ConnectionConfig) -> list[Finding]:
    """A warning for a retired provider; for Antigravity, what its terms and credits mean."""
    retired = RETIRED.get(connection.provider)
    if retired is not None:
        fix = (
            f"sign in with the Antigravity CLI (agy), run `rungway connections import "
            f"{retired.successor} --name NAME`, and use `provider: {retired.successor}`; keep "
            "this connection only for a seat Google still serves"
        )
        return [Finding(Level.WARN, subject, f"retired: {retired.notice}", fix)]
    if connection.provider != "antigravity":
        return []
    findings: list[Finding] = []
    if connection.clients != "any":
        message = (
            "its terms keep it to Google's Antigravity clients, which take no base URL: no "
            "request through the gateway will use it"
        )
        fix = (
            "set `clients: any` only if you accept the risk: Google's Antigravity terms "
            "(section 6) forbid other clients and Google has suspended accounts for it"
        )
        findings.append(Finding(Level.WARN, subject, message, fix))
    if connection.credits:
        message = (
            "spends Google One AI credits past its buckets (`credits: true`): it meters to "
            "paid, so auto/subscription leaves it out"
        )
        findings.append(Finding(Level.OK, subject, message))
    return findings
