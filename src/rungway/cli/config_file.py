"""Which config file a command reads: one rule for every command.

`--config`, else `$RUNGWAY_CONFIG`, else `./rungway.yaml`, else `rungway.yaml` in the
user's config directory. The first two are taken as given, so a mistyped path is reported
rather than quietly replaced by another file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import platformdirs
import typer
from rich.console import Console

from rungway.config import ConfigError, Settings, load_settings

ENV_VAR = "RUNGWAY_CONFIG"
FILE_NAME = "rungway.yaml"

err = Console(stderr=True)

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help=f"The YAML config file; else ${ENV_VAR}, ./{FILE_NAME}, then the user config dir's.",
        show_default=False,
    ),
]


def user_config_path() -> Path:
    """`rungway.yaml` in the user's config directory (`~/.config/rungway/` on Linux)."""
    return platformdirs.user_config_path("rungway") / FILE_NAME


def find_config(explicit: Path | None) -> Path | None:
    """The config file the lookup rule picks, or None when no candidate is there."""
    if explicit is not None:
        return explicit.expanduser()
    named = os.environ.get(ENV_VAR, "").strip()
    if named:
        return Path(named).expanduser()
    for candidate in (Path.cwd() / FILE_NAME, user_config_path()):
        if candidate.is_file():
            return candidate
    return None


def require_config(explicit: Path | None) -> Path:
    """The config file the lookup rule picks; exit 2 naming every place looked when none."""
    path = find_config(explicit)
    if path is not None:
        return path
    err.print(
        "[bold red]rungway: no config file[/]\n"
        f"looked for --config, ${ENV_VAR}, ./{FILE_NAME} and {user_config_path()}\n"
        "hint: `rungway init` writes one from the logins and keys on this machine, "
        "and `rungway demo` runs without one",
        highlight=False,
    )
    raise typer.Exit(2)


def load_config(explicit: Path | None) -> tuple[Path, Settings]:
    """The picked config file and its settings; exit 2 with the error when it is invalid."""
    path = require_config(explicit)
    try:
        return path, load_settings(path)
    except ConfigError as error:
        err.print(f"[bold red]rungway: invalid config[/]\n{error}", highlight=False)
        raise typer.Exit(2) from None
