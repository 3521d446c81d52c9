"""`rungway serve`: run the gateway from a config file."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer
import uvicorn
from pydantic import SecretStr
from rich.console import Console

from rungway.app import build_gateway
from rungway.config import ConfigError, Settings, check_bind, load_settings, read_secrets
from rungway.runner import uvicorn_config

err = Console(stderr=True)


def serve(
    config: Annotated[Path, typer.Option("--config", "-c", help="The YAML config file.")],
    host: Annotated[str | None, typer.Option(help="Bind address (overrides server.host).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (overrides server.port).")] = None,
) -> None:
    """Run the gateway with the connections in CONFIG."""
    try:
        settings = load_settings(config)
        secrets = read_secrets(settings, source=str(config))
        bind_host = host or settings.server.host
        check_bind(bind_host, settings)
    except ConfigError as error:
        err.print(f"[bold red]rungway: cannot start[/]\n{error}", highlight=False)
        raise typer.Exit(2) from None
    run(settings, secrets, bind_host, port if port is not None else settings.server.port)


def run(settings: Settings, secrets: dict[str, SecretStr], host: str, port: int) -> None:
    """Serve the gateway in the foreground until interrupted."""
    gateway = build_gateway(settings, secrets)
    # The server shuts down gracefully on Ctrl-C and then re-raises the signal; an
    # interrupt the user asked for is a normal end, not an error.
    with contextlib.suppress(KeyboardInterrupt):
        uvicorn.Server(uvicorn_config(gateway.app, host=host, port=port)).run()
