"""`rungway doctor`: check a config and what it points at, each finding with its fix.

The checks: the config file (found as every command finds it) and its credentials; each
paid rung's budget (a WARN for one explicitly left without a limit); that the ledger file
opens, has a schema this release knows, and no damage; where live state is kept, and that
a configured Redis and PostgreSQL answer (`store_checks.py`); that the credential store opens,
when a connection uses it; then, for each connection, that its API answers at its base URL
and this machine's clock agrees with the upstream's `Date` header (both from one request,
see `probes.py`), and when its token expires (a JWT's `exp`, or a stored login that cannot
renew itself). Nothing is written, and no credential is sent anywhere.
Any FAIL makes the exit code 1.
"""

from __future__ import annotations

import base64
import binascii
import os
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from pydantic import SecretStr
from rich.console import Console

from rungway.app import build_roster
from rungway.cli.config_file import ConfigOption, require_config
from rungway.cli.findings import Finding, Level, show
from rungway.cli.glm_check import glm_findings
from rungway.cli.google_plans import google_plan_findings
from rungway.cli.plan_terms import terms_findings
from rungway.cli.plan_usage_check import plan_usage_findings
from rungway.cli.probes import Probe, api_finding, clock_skew, probe_all
from rungway.cli.store_checks import store_findings
from rungway.cli.times import countdown, iso_time
from rungway.config import (
    ConfigError,
    ConnectionConfig,
    Settings,
    check_bind,
    load_settings,
)
from rungway.credentials.secrets import connection_proxy, open_store, read_secrets
from rungway.credentials.store import CredentialStore, StoredCredential, StoreError
from rungway.egress import BadProxy, ProxyEnvironment
from rungway.ledger.journal import journal_path
from rungway.ledger.sqlite import SCHEMA_VERSION
from rungway.routing.rungs import Rung
from rungway.routing.settings import LadderSettings
from rungway.stores import default_ledger_path

out = Console()
EXPIRY_WARNING_S = 24 * 3600.0
_PAID = tuple(rung for rung in Rung if rung.paid)


def doctor(
    config: ConfigOption = None,
    timeout: Annotated[
        float, typer.Option(help="Seconds to wait for each upstream's answer.", min=0.1)
    ] = 5.0,
) -> None:
    """Check the config, the ledger and each upstream (its API, clock, token expiry, and a
    Kimi Code or MiniMax plan's usage, read with its key)."""
    # Only finding the file can stop doctor; an invalid one is reported as a finding.
    findings, settings, secrets = check_config(require_config(config))
    if settings is not None:
        ledger = settings.ledger.path or default_ledger_path()
        findings.extend(ledger_findings(ledger))
        findings.extend(store_findings(settings, secrets, ledger, timeout))
        findings.extend(proxy_findings(os.environ))
        store = _store(settings, findings)
        proxies = {c.id: connection_proxy(c.id, secrets) for c in settings.connections}
        probes = probe_all(settings.connections, timeout, proxies=proxies)
        usage = plan_usage_findings(settings.connections, secrets, timeout, proxies)
        for connection in settings.connections:
            findings.extend(_connection_findings(connection, probes, secrets, store))
            if connection.id in usage:
                findings.append(usage[connection.id])
    for finding in findings:
        show(finding, out)
    failed = sum(finding.level is Level.FAIL for finding in findings)
    warned = sum(finding.level is Level.WARN for finding in findings)
    out.print(f"\n{len(findings)} checks: {failed} failed, {warned} warnings", highlight=False)
    if failed:
        raise typer.Exit(1)


def check_config(path: Path) -> tuple[list[Finding], Settings | None, dict[str, SecretStr]]:
    """The config file's findings, its settings if it loads, and the secrets that read."""
    try:
        settings = load_settings(path)
    except ConfigError as error:
        return [Finding(Level.FAIL, "config", str(error), "correct the keys named above")], None, {}
    findings = [
        Finding(Level.OK, "config", f"{path}: valid, {len(settings.connections)} connections")
    ]
    secrets: dict[str, SecretStr] = {}
    try:
        secrets = read_secrets(settings, source=str(path))
    except ConfigError as error:
        fix = "set each environment variable or create each file named above"
        findings.append(Finding(Level.FAIL, "credentials", str(error), fix))
    else:
        findings.append(Finding(Level.OK, "credentials", "every referenced secret is readable"))
    try:
        check_bind(settings.server.host, settings)
    except ConfigError as error:
        fix = "add `client_keys`, or set `server.host: 127.0.0.1`"
        findings.append(Finding(Level.FAIL, "server", str(error), fix))
    findings.extend(budget_findings(settings.ladder))
    findings.extend(terms_findings(build_roster(settings), len(settings.client_keys)))
    # With unreadable credentials (reported above) token expiry is not checked.
    return findings, settings, secrets


def proxy_findings(environ: Mapping[str, str]) -> list[Finding]:
    """Where the environment's proxy variables send upstream requests (none when unset; a
    connection's own `proxy:` shows in its probe's finding)."""
    try:
        environment = ProxyEnvironment.read(environ)
    except BadProxy:
        return []  # the credentials finding names it
    if environment.http is None and environment.https is None:
        return []
    said = [
        f"{scheme}:// upstreams {'direct' if proxy is None else f'through {proxy}'}"
        for scheme, proxy in (("https", environment.https), ("http", environment.http))
    ]
    if environment.bypass is not None:
        said.append(f"no_proxy {environment.bypass.value}")
    return [Finding(Level.OK, "proxy", "; ".join(said))]


def budget_findings(ladder: LadderSettings) -> list[Finding]:
    """A WARN for each paid rung left without a limit (`null`), else one OK with the budgets."""
    period = ladder.budget_period
    unlimited = ladder.unlimited_paid_rungs()
    if unlimited:
        return [
            Finding(
                Level.WARN,
                f"budget {rung.label}",
                f"ladder.rung_budget_usd.{rung.label} is null: the {rung.label} rung spends "
                "without limit",
                f"set `ladder.rung_budget_usd.{rung.label}` to what it may spend each "
                f"{period} (0 closes the rung)",
            )
            for rung in unlimited
        ]
    shown = ", ".join(_budget_text(rung, ladder.budget_for(rung), period) for rung in _PAID)
    return [Finding(Level.OK, "budgets", shown)]


def _budget_text(rung: Rung, budget: float | None, period: str) -> str:
    if not budget:
        return f"{rung.label} closed (0)"
    return f"{rung.label} ${budget:,.2f} a {period}"


def ledger_findings(path: Path) -> list[Finding]:
    """The ledger file: opens, schema version, integrity, journal mode, crash leftovers."""
    subject = f"ledger {path}"
    if not path.exists():
        if _writable_folder(path.parent):
            return [Finding(Level.OK, subject, "not created yet; `rungway serve` creates it")]
        fix = f"create {path.parent} or set `ledger.path` to a writable place"
        return [Finding(Level.FAIL, subject, "its folder cannot be written", fix)]
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            mode = db.execute("PRAGMA journal_mode").fetchone()[0]
            check = db.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error as error:
        fix = "move the file aside (the gateway starts a new one) or restore a backup"
        return [Finding(Level.FAIL, subject, f"cannot be read: {error}", fix)]
    findings = []
    if check != "ok":
        fix = "stop the gateway, move the file aside and restore a backup"
        findings.append(Finding(Level.FAIL, subject, f"damaged: {check}", fix))
    elif version > SCHEMA_VERSION:
        message = f"schema version {version} is newer than this release's {SCHEMA_VERSION}"
        findings.append(Finding(Level.FAIL, subject, message, "upgrade rungway"))
    elif version < SCHEMA_VERSION:
        message = f"schema version {version}; the next start migrates it to {SCHEMA_VERSION}"
        findings.append(Finding(Level.WARN, subject, message, "nothing to do; back it up first"))
    else:
        findings.append(Finding(Level.OK, subject, f"opens, schema version {version}, intact"))
    if mode.lower() != "wal":
        message = f"journal mode {mode}, not WAL: reads will wait for the writer"
        findings.append(
            Finding(Level.WARN, subject, message, "start the gateway once; it sets WAL")
        )
    findings.extend(_journal_findings(journal_path(path)))
    return findings


def _journal_findings(path: Path) -> list[Finding]:
    if not path.exists():
        return []
    subject = f"journal {path}"
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
            held = db.execute("SELECT COUNT(*) FROM reservations").fetchone()[0]
            settled = (
                db.execute("SELECT COUNT(*) FROM settled").fetchone()[0]
                if "settled" in tables
                else 0
            )
        finally:
            db.close()
    except sqlite3.Error as error:
        fix = "stop the gateway and move the journal aside (open reservations are then lost)"
        return [Finding(Level.FAIL, subject, f"cannot be read: {error}", fix)]
    return [Finding(Level.OK, subject, f"{held} open reservations, {settled} rows to replay")]


def _store(settings: Settings, findings: list[Finding]) -> CredentialStore | None:
    """The credential store, when a connection uses it, with a finding on its health."""
    if not any(c.credential is not None and c.credential.store for c in settings.connections):
        return None
    try:
        store = open_store(settings.credentials)
        names = store.names()
    except StoreError as error:
        fix = "use the key the store was written with, or re-import the logins"
        findings.append(Finding(Level.FAIL, "credential store", str(error), fix))
        return None
    message = f"{store.path}: opens, {len(names)} stored logins"
    findings.append(Finding(Level.OK, "credential store", message))
    return store


def stored_expiry(subject: str, stored: StoredCredential, now: float) -> Finding:
    """An imported login: fine while it can renew itself or its token is still valid."""
    fix = "log in again and re-import it with `rungway connections import`"
    if stored.refresh_token:
        return Finding(Level.OK, subject, "stored login renews its token itself")
    if stored.expires_at is None:
        return Finding(Level.OK, subject, "stored token has no known expiry")
    return _expiry(subject, stored.expires_at, now, fix)


def _writable_folder(folder: Path) -> bool:
    # The nearest folder that exists must let the gateway create the rest and the file.
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            return candidate.is_dir() and os.access(candidate, os.W_OK | os.X_OK)
    return False


def _connection_findings(
    connection: ConnectionConfig,
    probes: dict[str, Probe],
    secrets: dict[str, SecretStr],
    store: CredentialStore | None,
) -> list[Finding]:
    subject = f"connection {connection.id}"
    probe = probes[connection.id]
    findings = [
        api_finding(subject, connection, probe),
        *glm_findings(subject, connection),
        *google_plan_findings(subject, connection),
    ]
    skew = clock_skew(subject, probe)
    if skew is not None:
        findings.append(skew)
    name = connection.credential.store if connection.credential is not None else None
    expiry: Finding | None = None
    if name is not None:
        # A stored login's own record says whether it renews; its access token may well
        # have expired while no gateway ran to renew it.
        if store is not None:
            try:
                expiry = stored_expiry(subject, store.get(name), time.time())
            except StoreError:
                expiry = None  # reported with the credentials
    else:
        secret = secrets.get(f"connection:{connection.id}")
        if secret is not None:
            expiry = token_expiry(subject, secret.get_secret_value(), time.time())
    if expiry is not None:
        findings.append(expiry)
    return findings


def token_expiry(subject: str, token: str, now: float) -> Finding | None:
    """For a JWT credential, its `exp`: FAIL once passed, WARN within a day; None otherwise."""
    claims = _jwt_claims(token)
    if claims is None:
        return None
    expires = claims.get("exp")
    if not isinstance(expires, int | float):
        return Finding(Level.OK, subject, "token is a JWT without an expiry")
    return _expiry(subject, float(expires), now, "log in again and update the credential")


def _expiry(subject: str, expires: float, now: float, fix: str) -> Finding:
    when = iso_time(expires)
    if expires <= now:
        return Finding(Level.FAIL, subject, f"token expired at {when}", fix)
    if expires - now <= EXPIRY_WARNING_S:
        return Finding(Level.WARN, subject, f"token expires {countdown(expires, now)}", fix)
    return Finding(Level.OK, subject, f"token valid until {when}")


def _jwt_claims(token: str) -> dict[str, Any] | None:
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        header, claims = (orjson.loads(_unpadded(part)) for part in parts[:2])
    except (ValueError, binascii.Error):
        return None
    if not isinstance(header, dict) or "alg" not in header or not isinstance(claims, dict):
        return None
    return claims


def _unpadded(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
