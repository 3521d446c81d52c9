"""`rungway doctor`: check a config and what it points at, each finding with its fix.

The checks: the config file and its credentials; that the ledger file opens, has a schema
this release knows, and no damage; that the credential store opens, when a connection
uses it; then, for each connection, that its base URL answers HTTP at all (any status
will do), that this machine's clock agrees with the upstream's `Date` header, and when
its token expires (a JWT's `exp`, or a stored login that cannot renew itself). Nothing is written,
and no credential is sent anywhere. Any FAIL makes the exit code 1.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import datetime as dt
import os
import sqlite3
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import httpx
import orjson
import typer
from pydantic import SecretStr
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn

from rungway.adapters.registry import provider_entry
from rungway.app import default_ledger_path
from rungway.cli.status import countdown
from rungway.config import (
    ConfigError,
    ConnectionConfig,
    Settings,
    check_bind,
    load_settings,
    read_secrets,
)
from rungway.credentials.store import CredentialStore, StoredCredential, StoreError
from rungway.ledger.journal import journal_path
from rungway.ledger.sqlite import SCHEMA_VERSION

out = Console()
MAX_SKEW_S = 30.0
"""Beyond this, reset instants read from the upstream and the local clock disagree."""
EXPIRY_WARNING_S = 24 * 3600.0


class Level(StrEnum):
    """How a finding bears on running the gateway."""

    OK = "OK"
    WARN = "WARN"
    FAIL = "FAIL"


@dataclass(frozen=True, slots=True)
class Finding:
    """One checked thing: how it stands, what was seen, and what to do about it."""

    level: Level
    subject: str
    message: str
    fix: str = ""


@dataclass(frozen=True, slots=True)
class Probe:
    """What one connection's base URL answered: its status and `Date`, or why nothing."""

    connection_id: str
    url: str
    status: int | None = None
    date: str | None = None
    error: str = ""
    local_time: float = 0.0


def doctor(
    config: Annotated[Path, typer.Option("--config", "-c", help="The YAML config file.")],
    timeout: Annotated[
        float, typer.Option(help="Seconds to wait for each upstream's answer.", min=0.1)
    ] = 5.0,
) -> None:
    """Check the config, the ledger and each upstream (reachability, clock, token expiry)."""
    findings, settings, secrets = check_config(config)
    if settings is not None:
        findings.extend(ledger_findings(settings.ledger.path or default_ledger_path()))
        store = _store(settings, findings)
        probes = _probe_all(settings.connections, timeout)
        for connection in settings.connections:
            findings.extend(_connection_findings(connection, probes, secrets, store))
    for finding in findings:
        _show(finding)
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
    # With unreadable credentials (reported above) token expiry is not checked.
    return findings, settings, secrets


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
        store = settings.credentials.open()
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


def base_url(connection: ConnectionConfig) -> str:
    """Where the gateway sends this connection's requests."""
    url = connection.base_url or provider_entry(connection.provider).default_base_url or ""
    return url.rstrip("/")


def _probe_all(connections: tuple[ConnectionConfig, ...], timeout: float) -> dict[str, Probe]:
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("probing upstreams", total=len(connections))

        async def one(client: httpx.AsyncClient, connection: ConnectionConfig) -> Probe:
            probe = await probe_url(client, connection.id, base_url(connection))
            progress.update(task, advance=1, description=f"probed {connection.id}")
            return probe

        async def every() -> list[Probe]:
            async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:
                return list(await asyncio.gather(*(one(client, c) for c in connections)))

        probes = asyncio.run(every())
    return {probe.connection_id: probe for probe in probes}


async def probe_url(client: httpx.AsyncClient, connection_id: str, url: str) -> Probe:
    """One GET without credentials: any HTTP answer means the upstream is reachable."""
    try:
        response = await client.get(url)
    except httpx.HTTPError as error:
        return Probe(connection_id, url, error=f"{type(error).__name__}: {error}".rstrip(": "))
    return Probe(
        connection_id, url, response.status_code, response.headers.get("date"), "", time.time()
    )


def _connection_findings(
    connection: ConnectionConfig,
    probes: dict[str, Probe],
    secrets: dict[str, SecretStr],
    store: CredentialStore | None,
) -> list[Finding]:
    subject = f"connection {connection.id}"
    probe = probes[connection.id]
    findings = [reachability(subject, probe)]
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


def reachability(subject: str, probe: Probe) -> Finding:
    """OK for any HTTP answer; FAIL with the error when nothing answered."""
    if probe.status is not None:
        return Finding(Level.OK, subject, f"{probe.url} answers (HTTP {probe.status})")
    fix = "check `base_url`, that the upstream is running, and the network or proxy between"
    return Finding(Level.FAIL, subject, f"{probe.url} cannot be reached: {probe.error}", fix)


def clock_skew(subject: str, probe: Probe) -> Finding | None:
    """How far this machine's clock is from the upstream's `Date`; WARN past 30 s."""
    if probe.date is None:
        return None
    try:
        upstream = parsedate_to_datetime(probe.date).timestamp()
    except (TypeError, ValueError):
        return Finding(Level.WARN, subject, f"unreadable Date header {probe.date!r}")
    # `Date` has whole seconds: up to one second of difference is only rounding.
    skew = probe.local_time - upstream
    if abs(skew) <= MAX_SKEW_S:
        return Finding(Level.OK, subject, f"clock within {max(abs(skew), 1):.0f}s of upstream")
    side = "ahead of" if skew > 0 else "behind"
    message = f"this clock is {abs(skew):.0f}s {side} the upstream's: quota resets will be off"
    return Finding(Level.WARN, subject, message, "synchronise the clock (NTP)")


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
    when = dt.datetime.fromtimestamp(expires, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
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


_STYLE = {Level.OK: "green", Level.WARN: "yellow", Level.FAIL: "bold red"}


def _show(finding: Finding) -> None:
    style = _STYLE[finding.level]
    head = f"[{style}]{finding.level.value:<4}[/] {escape(finding.subject)}: "
    out.print(head + escape(finding.message), highlight=False)
    if finding.fix and finding.level is not Level.OK:
        out.print(f"     fix: {escape(finding.fix)}", highlight=False)
