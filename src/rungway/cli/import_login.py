"""`rungway connections import`: store a Claude Code, Codex or Copilot login, encrypted."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from rungway.config import ConfigError, CredentialStoreSettings, load_settings
from rungway.credentials.logins import DEFAULT_SOURCES, LoginError, read_login
from rungway.credentials.store import LOGIN_KINDS, LoginKind, StoreError

out = Console()
err = Console(stderr=True)

_CONNECTION: dict[LoginKind, tuple[str, str]] = {
    # (provider, an example model the snippet lists)
    "claude": ("anthropic", "claude-sonnet-4-5"),
    "codex": ("codex", "gpt-5-codex"),
    "copilot": ("copilot", "gpt-4.1"),
}


def import_login(
    kind: Annotated[str, typer.Argument(help="claude, codex or copilot.")],
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
    if not name or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        err.print(f"[red]--name {name!r}[/]: use letters, digits, '-', '_' and '.'")
        raise typer.Exit(2)
    try:
        settings = (
            load_settings(config).credentials if config is not None else CredentialStoreSettings()
        )
        with out.status(f"reading the {login} login from {source or DEFAULT_SOURCES[login]}"):
            credential = read_login(login, source)
            store = settings.open()
            store.put(name, credential)
    except (ConfigError, LoginError, StoreError) as error:
        err.print(f"[red]cannot import:[/] {error}")
        raise typer.Exit(1) from None
    expiry = (
        dt.datetime.fromtimestamp(credential.expires_at, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        if credential.expires_at is not None
        else "unknown"
    )
    renews = "renews itself" if credential.refresh_token or login == "copilot" else "cannot renew"
    out.print(
        f"stored the {login} login as [bold]{name}[/] in {store.path} "
        f"(access token expires {expiry}; {renews})"
    )
    provider, model = _CONNECTION[login]
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
