"""`rungway connections import`: store a Claude Code, Codex, Copilot, Antigravity or
Gemini CLI login, encrypted."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from rungway.cli.times import iso_time
from rungway.config import ConfigError, CredentialStoreSettings, load_settings
from rungway.credentials.logins import DEFAULT_SOURCES, LoginError, read_login
from rungway.credentials.secrets import open_store
from rungway.credentials.store import LOGIN_KINDS, LoginKind, StoredCredential, StoreError

out = Console()
err = Console(stderr=True)

LOGIN_CONNECTION: dict[LoginKind, tuple[str, str]] = {
    # (provider, an example model the snippet lists)
    "claude": ("anthropic", "claude-sonnet-4-5"),
    "codex": ("codex", "gpt-5-codex"),
    "copilot": ("copilot", "gpt-4.1"),
    "gemini": ("gemini-code-assist", "gemini-2.5-pro"),
    "antigravity": ("antigravity", "gemini-3-flash"),
}
"""The provider a connection using each kind of login names, and a model it serves."""
AGY_FILE_UNKNOWN = (
    "The Antigravity CLI's own file is not documented by Google: some builds may keep the "
    'login in the OS keyring instead. Write it to a file ({"access_token", '
    '"refresh_token", "expiry"}) and pass --from FILE, or set AGY_TOKEN_FILE.'
)
CODE_ASSIST_RETIRED = (
    "note: Google stopped serving the Gemini CLI and Code Assist to consumer plans on "
    "2026-06-18; those plans moved to Antigravity. Sign in with the Antigravity CLI (agy) "
    "and run `rungway connections import antigravity --name NAME` (or --from FILE). A "
    "gemini login is still imported, for a Code Assist seat Google may still serve."
)


@dataclass(frozen=True, slots=True)
class ImportedLogin:
    """A login now kept in the credential store under `name`."""

    kind: LoginKind
    name: str
    credential: StoredCredential
    store_path: Path

    def summary(self) -> str:
        """One line saying where it is stored, when its token expires and whether it renews."""
        expires_at = self.credential.expires_at
        expiry = iso_time(expires_at) if expires_at is not None else "unknown"
        renews = (
            "renews itself"
            if self.credential.refresh_token or self.kind == "copilot"
            else "cannot renew"
        )
        return (
            f"stored the {self.kind} login as {self.name} in {self.store_path} "
            f"(access token expires {expiry}; {renews})"
        )


def store_login(
    kind: LoginKind, name: str, source: str | None, settings: CredentialStoreSettings
) -> ImportedLogin:
    """Read the login of `kind` from `source` (or the tool's own file) and keep it encrypted
    in the store as `name`; raises LoginError or StoreError saying what to fix."""
    credential = read_login(kind, source)
    store = open_store(settings)
    store.put(name, credential)
    return ImportedLogin(kind, name, credential, store.path)


def import_login(
    kind: Annotated[str, typer.Argument(help="claude, codex, copilot, antigravity or gemini.")],
    name: Annotated[
        str, typer.Option("--name", help="The name the config uses: credential: {store: NAME}.")
    ],
    source: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="The login file (default: the tool's own), or env:VARIABLE for a Copilot token.",
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="Use this config's `credentials` section."),
    ] = None,
) -> None:
    """Store a login encrypted in the credential store and print the config to use it."""
    if kind not in LOGIN_KINDS:
        err.print(f"[red]unknown login kind {kind!r}[/]; use one of: {', '.join(LOGIN_KINDS)}")
        raise typer.Exit(2)
    login: LoginKind = kind
    if login == "gemini":
        err.print(CODE_ASSIST_RETIRED, markup=False, highlight=False)
    if not name or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        err.print(f"[red]--name {name!r}[/]: use letters, digits, '-', '_' and '.'")
        raise typer.Exit(2)
    try:
        settings = (
            load_settings(config).credentials if config is not None else CredentialStoreSettings()
        )
        with out.status(f"reading the {login} login from {source or DEFAULT_SOURCES[login]}"):
            imported = store_login(login, name, source, settings)
    except (ConfigError, LoginError, StoreError) as error:
        err.print(f"[red]cannot import:[/] {error}")
        if login == "antigravity" and isinstance(error, LoginError) and source is None:
            err.print(AGY_FILE_UNKNOWN, markup=False, highlight=False)
        raise typer.Exit(1) from None
    out.print(imported.summary(), markup=False, highlight=False)
    provider, model = LOGIN_CONNECTION[login]
    out.print("\nAdd it to the config's `connections`:\n")
    out.print(
        f"  - id: {name}\n"
        f"    provider: {provider}\n"
        f"    auth: oauth\n"
        f"    credential: {{store: {name}}}\n"
        f"    models: [{model}]",
        markup=False,
        highlight=False,
    )
