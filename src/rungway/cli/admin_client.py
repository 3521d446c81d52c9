"""Talking to a running gateway's admin API from the command line."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from rungway.config import ConfigError, load_settings

err = Console(stderr=True)

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="Find the gateway (and its admin key) from this config."),
]
UrlOption = Annotated[
    str | None, typer.Option("--url", help="The gateway's base URL (overrides the config).")
]
KeyEnvOption = Annotated[
    str,
    typer.Option("--admin-key-env", help="Environment variable holding the admin key, if any."),
]


def admin_call(method: str, path: str, config: Path | None, url: str | None, key_env: str) -> Any:
    """Send one admin API request and return its JSON; exit with a clear message on error."""
    base = url or _url_from(config)
    request = urllib.request.Request(f"{base.rstrip('/')}{path}", method=method)
    key = os.environ.get(key_env)
    if key:
        request.add_header("authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:
        try:
            message = json.load(error)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = error.reason
        err.print(f"[red]{method} {path}: HTTP {error.code}: {message}[/]", highlight=False)
        raise typer.Exit(1) from None
    except urllib.error.URLError as error:
        err.print(f"[red]cannot reach the gateway at {base}: {error.reason}[/]", highlight=False)
        raise typer.Exit(1) from None


def _url_from(config: Path | None) -> str:
    if config is None:
        return "http://127.0.0.1:4141"
    try:
        settings = load_settings(config)
    except ConfigError as error:
        err.print(f"[red]{error}[/]")
        raise typer.Exit(2) from None
    host = settings.server.host
    if host in ("0.0.0.0", "::"):  # a wildcard bind is reached on loopback
        host = "127.0.0.1"
    return f"http://{host}:{settings.server.port}"
