"""Talking to a running gateway's admin API from the command line.

The gateway is found at `--url`, else at the address of the config file the lookup rule
picks (`config_file.py`), else at `http://127.0.0.1:4141`.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from rungway.cli.config_file import ConfigOption, find_config
from rungway.config import ConfigError, load_settings

__all__ = ["ConfigOption", "KeyEnvOption", "UrlOption", "admin_call", "admin_request"]

err = Console(stderr=True)

DEFAULT_URL = "http://127.0.0.1:4141"

UrlOption = Annotated[
    str | None, typer.Option("--url", help="The gateway's base URL (overrides the config).")
]
KeyEnvOption = Annotated[
    str,
    typer.Option("--admin-key-env", help="Environment variable holding the admin key, if any."),
]


class GatewayUnreachable(Exception):
    """No gateway answered at the address; the message says where and why."""


def admin_request(
    method: str, path: str, config: Path | None, url: str | None, key_env: str
) -> tuple[int, Any]:
    """Send one admin API request; its status and JSON body, whatever the status."""
    base = url or gateway_url(config)
    request = urllib.request.Request(f"{base.rstrip('/')}{path}", method=method)
    key = os.environ.get(key_env)
    if key:
        request.add_header("authorization", f"Bearer {key}")
    # The gateway is reached directly: a proxy variable meant for the upstreams would send
    # a loopback address to a proxy that cannot reach it.
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with direct.open(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        try:
            return error.code, json.load(error)
        except ValueError:
            return error.code, {"error": {"message": str(error.reason)}}
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise GatewayUnreachable(f"cannot reach the gateway at {base}: {reason}") from None


def admin_call(method: str, path: str, config: Path | None, url: str | None, key_env: str) -> Any:
    """Send one admin API request and return its JSON; exit with a clear message on error."""
    try:
        status, payload = admin_request(method, path, config, url, key_env)
    except GatewayUnreachable as error:
        err.print(f"[red]{escape(str(error))}[/]", highlight=False)
        raise typer.Exit(1) from None
    return checked(method, path, status, payload)


def checked(method: str, path: str, status: int, payload: Any) -> Any:
    """An admin API answer's JSON; exit with its message when it is an error."""
    if status >= 400:
        message = escape(error_message(payload))
        err.print(f"[red]{method} {path}: HTTP {status}: {message}[/]", highlight=False)
        raise typer.Exit(1)
    return payload


def error_message(payload: Any) -> str:
    """The message of an admin API error body, or the body itself when it has none."""
    try:
        return str(payload["error"]["message"])
    except (KeyError, TypeError):
        return str(payload)


def gateway_url(config: Path | None) -> str:
    """The base URL of the gateway the picked config file describes."""
    path = find_config(config)
    if path is None:
        return DEFAULT_URL
    try:
        settings = load_settings(path)
    except ConfigError as error:
        err.print(f"[red]{error}[/]")
        raise typer.Exit(2) from None
    host = settings.server.host
    if host in ("0.0.0.0", "::"):  # a wildcard bind is reached on loopback
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.server.port}"
