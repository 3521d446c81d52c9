"""Where a command reads the ledger when no gateway answers: the cluster's PostgreSQL when
the config names one (`ledger.postgres`), else this machine's ledger file."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from rungway.budget.period import Period, period_bounds
from rungway.cli.config_file import find_config
from rungway.config import ConfigError, CredentialRef, Settings, load_settings
from rungway.credentials.secrets import open_store, read_credential
from rungway.credentials.store import StoreError
from rungway.ledger.report import Dimension, LedgerUnavailable
from rungway.routing.rungs import Rung
from rungway.routing.snapshot import RungSpend
from rungway.server.spend import SpendBook

if TYPE_CHECKING:
    # Imported where the config names PostgreSQL: asyncpg costs ~20 ms of every start.
    from rungway.ledger.postgres import PostgresReader

err = Console(stderr=True)
_RUNGS = {rung.label: rung for rung in Rung}


def configured(config: Path | None) -> Settings | None:
    """The settings of the config file the lookup rule picks (None when there is none);
    exit with the config's own message when it is not valid."""
    path = find_config(config)
    if path is None:
        return None
    try:
        return load_settings(path)
    except ConfigError as error:
        err.print(f"[red]{escape(str(error))}[/]", highlight=False)
        raise typer.Exit(2) from None


def postgres_reader(settings: Settings | None) -> PostgresReader | None:
    """A reader of the PostgreSQL ledger the settings name, or None when they name none."""
    postgres = settings.ledger.postgres if settings is not None else None
    if settings is None or postgres is None:
        return None
    dsn = postgres.dsn
    if isinstance(dsn, CredentialRef):
        try:
            store = open_store(settings.credentials) if dsn.store is not None else None
            dsn = read_credential(dsn, store).get_secret_value()
        except (ValueError, OSError, StoreError) as error:
            err.print(f"[red]ledger.postgres.dsn: {escape(str(error))}[/]", highlight=False)
            raise typer.Exit(2) from None
    from rungway.ledger.postgres import PostgresReader  # noqa: PLC0415 - only with PostgreSQL

    return PostgresReader(dsn, postgres.db_schema)


def spend_from_postgres(
    reader: PostgresReader, settings: Settings, by: Dimension, period: Period
) -> dict[str, Any]:
    """The `/admin/spend` body, read from PostgreSQL: budgets show settled spend only, since
    what is held lives in the running gateways."""
    now = time.time()
    since, _ = period_bounds(settings.ladder.budget_period, now)
    try:
        spent = reader.spent_since(since, "rung")
        book = SpendBook(
            ledger=reader,
            ladder=settings.ladder,
            client_keys=settings.client_keys,
            rung_spend=lambda _: {
                _RUNGS[label]: RungSpend(total) for label, total in spent.items() if label in _RUNGS
            },
        )
        return asyncio.run(book.body(by, period, now))
    except LedgerUnavailable as error:
        fail(error)


def fail(error: LedgerUnavailable) -> NoReturn:
    """Print why the PostgreSQL ledger could not be read and exit."""
    err.print(f"[red]{escape(str(error))}[/]", highlight=False)
    raise typer.Exit(1)
