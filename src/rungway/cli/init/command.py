"""`rungway init`: write a starter config from the logins, keys and local models found here.

It shows what it found and the file it would write, and writes only when told to: a yes
at the prompt, or `--yes`. Logins go into the encrypted credential store at that moment,
never into the file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.console import Console
from rich.markup import escape

from rungway.cli.config_file import ENV_VAR, FILE_NAME, find_config, user_config_path
from rungway.cli.import_login import ImportedLogin, store_login
from rungway.cli.init.discovery import (
    KEY_VARIABLES,
    LOGIN_NAMES,
    SUBSCRIPTION_LOGINS,
    Discovery,
    discover,
    login_path,
)
from rungway.cli.init.starter import EXAMPLE, Starter, build_starter
from rungway.config import CredentialStoreSettings, parse_settings
from rungway.credentials.logins import LoginError
from rungway.credentials.store import StoreError

# Soft wrap: the config is shown exactly as it will be written, whatever the width.
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

TargetOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help=f"Where to write; else ${ENV_VAR}, else {FILE_NAME} in the user config dir.",
        show_default=False,
    ),
]


def init(
    config: TargetOption = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace the file if it already exists.")
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Write without asking (for scripts).")
    ] = False,
) -> None:
    """Write a starter config from the plan logins, API keys and local Ollama found here.

    Writes to --config, else $RUNGWAY_CONFIG, else rungway.yaml in the user config
    directory. No secret goes into the file: keys are read from their environment
    variables, and logins are imported into the encrypted credential store.
    """
    target = target_path(config)
    if target.exists() and not force:
        err.print(
            f"[bold red]rungway: {escape(str(target))} already exists[/]; nothing was changed\n"
            "hint: pass --force to replace it, or --config PATH to write elsewhere"
        )
        raise typer.Exit(1)
    with out.status("looking for plan logins, API keys and a local Ollama"):
        found = discover()
    _report(found)
    if not found.usable:
        _nothing_found(found)
        raise typer.Exit(1)
    starter = build_starter(found)
    # The file must load as written; a failure here is a bug in the renderer, not the user's.
    parse_settings(yaml.safe_load(starter.text), source="the starter config")
    out.print(f"\nThe config for {target}:\n", markup=False)
    out.print(starter.text, markup=False)
    if not yes:
        if not sys.stdin.isatty():
            err.print(
                "[bold red]rungway: not written[/]: no terminal to ask on\n"
                f"hint: run `rungway init --yes` to write {escape(str(target))} without asking"
            )
            raise typer.Exit(1)
        if not typer.confirm(f"Write it to {target}?", default=False):
            out.print("Nothing written.")
            return
    imported = _import_logins(starter)
    _write(target, starter.text)
    out.print(f"wrote {target}", markup=False)
    for login in imported:
        out.print(login.summary(), markup=False)
    _next_steps(target)


def target_path(explicit: Path | None) -> Path:
    """Where init writes: `--config`, else `$RUNGWAY_CONFIG`, else the user config dir's."""
    if explicit is not None:
        return explicit.expanduser()
    named = os.environ.get(ENV_VAR, "").strip()
    return Path(named).expanduser() if named else user_config_path()


def _report(found: Discovery) -> None:
    for login in found.logins:
        out.print(f"  found  {LOGIN_NAMES[login.kind]} login at {login.path}", markup=False)
    for key in found.keys:
        out.print(f"  found  ${key.variable} ({key.provider} API key)", markup=False)
    if found.ollama is not None and found.ollama.models:
        models = ", ".join(found.ollama.models)
        out.print(f"  found  Ollama at {found.ollama.base_url} with {models}", markup=False)
    for note in found.notes:
        out.print(f"  note   {note}", markup=False)


def _nothing_found(found: Discovery) -> None:
    looked = [f"{LOGIN_NAMES[kind]} login at {login_path(kind)}" for kind in SUBSCRIPTION_LOGINS]
    looked.append("API keys in " + ", ".join(f"${variable}" for variable, _ in KEY_VARIABLES))
    looked.append(f"Ollama at {found.ollama_url} (set $OLLAMA_HOST if it runs elsewhere)")
    err.print("[bold]rungway: found nothing to connect to[/]; nothing was written. Looked for:")
    for place in looked:
        err.print(f"  - {place}", markup=False)
    err.print(
        "\nLog in with Claude Code, Codex or the Gemini CLI, set an API key, or start Ollama, "
        "then run `rungway init` again; or write the config yourself, for example:\n"
    )
    err.print(EXAMPLE, markup=False)


def _import_logins(starter: Starter) -> list[ImportedLogin]:
    settings = CredentialStoreSettings()
    imported: list[ImportedLogin] = []
    for login in starter.imports:
        try:
            imported.append(store_login(login.kind, login.name, login.source, settings))
        except (LoginError, StoreError) as error:
            err.print(f"[bold red]rungway: not written[/]: cannot import the {login.kind} login")
            err.print(str(error), markup=False)
            raise typer.Exit(1) from None
    return imported


def _write(target: Path, text: str) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as error:
        err.print(f"[bold red]rungway: cannot write {escape(str(target))}[/]: {error.strerror}")
        raise typer.Exit(1) from None


def _next_steps(target: Path) -> None:
    # Other commands find the file on their own only when the lookup picks this one.
    picked = find_config(None)
    found_alone = picked is not None and picked.resolve() == target.resolve()
    flag = "" if found_alone else f" --config {target}"
    out.print(
        f"\nnext: `rungway doctor{flag}` checks it, and `rungway serve{flag}` starts the gateway",
        markup=False,
    )
