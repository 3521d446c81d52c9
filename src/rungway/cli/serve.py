"""`rungway serve`: run the gateway from a config file.

The listening socket is opened before anything else is done, so a port in use stops the
command with a clear message before any banner is printed or any file is created.
"""

from __future__ import annotations

import contextlib
import errno
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
import uvicorn
from pydantic import SecretStr
from rich.console import Console

from rungway.app import Gateway, build_gateway, build_roster
from rungway.cli import banner
from rungway.cli.config_file import ConfigOption, require_config
from rungway.cli.workers import recover_journals, refuse_unshared, supervise
from rungway.config import ConfigError, Settings, check_bind, load_settings
from rungway.credentials.secrets import read_secrets
from rungway.logs.output import LogFormat, configure
from rungway.runner import bind, uvicorn_config
from rungway.stores import default_ledger_path

err = Console(stderr=True)

LogFormatOption = Annotated[
    LogFormat,
    typer.Option(
        "--log-format", help="text for people, json for log shippers (one object a line)."
    ),
]
QuietOption = Annotated[
    bool, typer.Option("--quiet", "-q", help="No access line per request; warnings still show.")
]
WorkersOption = Annotated[
    int,
    typer.Option(
        "--workers",
        min=1,
        max=64,
        help="Gateway processes on this port; more than one needs `state.store: redis`.",
    ),
]


def serve(  # noqa: PLR0917 (typer maps each parameter to an option)
    config: ConfigOption = None,
    host: Annotated[str | None, typer.Option(help="Bind address (overrides server.host).")] = None,
    port: Annotated[
        int | None, typer.Option(min=0, max=65535, help="Port (overrides server.port).")
    ] = None,
    log_format: LogFormatOption = "text",
    quiet: QuietOption = False,
    workers: WorkersOption = 1,
) -> None:
    """Run the gateway with the connections in the config file."""
    path = require_config(config)
    try:
        settings = load_settings(path)
        secrets = read_secrets(settings, source=str(path))
        bind_host = host or settings.server.host
        check_bind(bind_host, settings)
        unshared = refuse_unshared(settings, workers)
        if unshared is not None:
            raise ConfigError(unshared)
    except ConfigError as error:
        err.print(f"[bold red]rungway: cannot start[/]\n{error}", highlight=False)
        raise typer.Exit(2) from None
    sock = listen(bind_host, port if port is not None else settings.server.port)
    run(settings, secrets, sock, config=path, log_format=log_format, quiet=quiet, workers=workers)


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on `host:port`; exit 2 with the reason and a hint when none opens."""
    try:
        return bind(host, port)
    except OSError as error:
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if error.errno == errno.EADDRINUSE:
            problem, hint = "is in use", "pass --port to choose another port, or stop what holds it"
        elif error.errno == errno.EACCES:
            problem, hint = "needs privileges to open", "pass --port with a port above 1023"
        elif error.errno == errno.EADDRNOTAVAIL:
            problem, hint = "is not an address of this machine", "pass --host 127.0.0.1"
        else:
            problem, hint = f"cannot be opened: {error.strerror}", "pass --host or --port"
        err.print(f"[bold red]rungway: cannot start:[/] {where} {problem}", highlight=False)
        err.print(f"hint: {hint}", highlight=False)
        raise typer.Exit(2) from None


def run(
    settings: Settings,
    secrets: dict[str, SecretStr],
    sock: socket.socket,
    *,
    config: Path | None,
    log_format: LogFormat = "text",
    quiet: bool = False,
    then: Callable[[str], None] | None = None,
    workers: int = 1,
) -> None:
    """Serve the gateway on `sock` in the foreground until interrupted, in `workers`
    processes (`rungway serve --workers`).

    `then` is called with the gateway's URL after the banner, to say more before serving.
    """
    ledger = settings.ledger.path or default_ledger_path()
    host, port = sock.getsockname()[:2]
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    # Journals that workers past today's count left behind are replayed into the ledger.
    recover_journals(ledger, keep=workers)
    writer = configure(log_format)
    if workers == 1:
        gateway = build_gateway(settings, secrets, access=None if quiet else writer.access)
        roster = gateway.roster
    else:
        roster = build_roster(settings)
    start = banner.facts(settings, roster, url, config, ledger, workers=workers)
    banner.show(start, json_lines=log_format == "json", console=err)
    if then is not None:
        then(url)
    if workers == 1:
        try:
            _serve(gateway, settings, sock)
        finally:
            writer.stop()
        return
    # No thread may run across a fork: the workers start their own writers.
    writer.stop()

    def serve_one(worker: int) -> None:
        own = configure(log_format)
        try:
            access = None if quiet else own.access
            _serve(build_gateway(settings, secrets, access=access, worker=worker), settings, sock)
        finally:
            own.stop()

    supervise(workers, serve_one, sock=sock, console=err)


def _serve(gateway: Gateway, settings: Settings, sock: socket.socket) -> None:
    host, port = sock.getsockname()[:2]
    # Logging is already set up: uvicorn adds no handlers of its own.
    server = uvicorn.Server(
        uvicorn_config(gateway.app, host=host, port=port, limits=settings.server, log_config=None)
    )
    # The server shuts down gracefully on Ctrl-C and then re-raises the signal; an
    # interrupt the user asked for is a normal end, not an error.
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[sock])
