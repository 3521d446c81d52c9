"""`rungway whatif`: replay a trace against the config's connections under each policy, and
show what each would have paid, against the oracle's optimum.

The trace comes from exactly one of `--from-ledger` (this gateway's ledger, `--since` and
`--until` bound it), `--trace FILE.jsonl` or `--synthetic PROFILE`; plan quotas from
`--plan` and `--window` (see `whatif_plans.py` for the grammar) or each provider's
default; `--accounts` replays a plan as a pool of accounts (`whatif_pools.py`).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from rungway.app import build_roster
from rungway.cli.config_file import load_config
from rungway.cli.ledger_source import postgres_reader
from rungway.cli.whatif_plans import FlagError, describe, plan_quotas
from rungway.cli.whatif_pools import (
    POOL_POLICY_NAMES,
    account_counts,
    is_pool_policy,
    pool_table,
    pool_world,
)
from rungway.cli.whatif_report import print_report, span
from rungway.config import Settings
from rungway.ledger.report import LedgerUnavailable
from rungway.pricing import PriceBook
from rungway.stores import default_ledger_path
from rungway.whatif.jsonl import read_jsonl
from rungway.whatif.ledger_trace import LedgerTrace, read_ledger_trace, read_postgres_trace
from rungway.whatif.metrics import measure
from rungway.whatif.outcome import Policy, PolicyRun, World
from rungway.whatif.plans import PlanError
from rungway.whatif.policies import (
    FALLBACK_COOLDOWN_S,
    POLICY_NAMES,
    AlwaysKey,
    FallbackOn429,
    LadderPolicy,
    TtlCached,
)
from rungway.whatif.pool_metrics import measure_pool
from rungway.whatif.synthetic import PROFILES, generate
from rungway.whatif.trace import Trace, TraceError

# No emoji codes: a flag echoed back, such as `plan:x:5h`, must not show `:x:` as a cross.
out = Console(emoji=False)
err = Console(stderr=True, emoji=False)
_PROGRESS_FROM = 5_000
"""Traces at least this long (times the policies) show a progress bar."""


def whatif(
    *,
    config: Annotated[
        Path | None, typer.Option("--config", help="The config file (connections, ladder).")
    ] = None,
    from_ledger: Annotated[
        bool, typer.Option("--from-ledger", help="Replay this gateway's ledger.")
    ] = False,
    since: Annotated[
        str | None, typer.Option("--since", help="Ledger rows from (ISO date/time, UTC).")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Ledger rows before (ISO date/time, UTC).")
    ] = None,
    trace_file: Annotated[Path | None, typer.Option("--trace", help="A JSONL trace file.")] = None,
    synthetic: Annotated[
        str | None,
        typer.Option("--synthetic", help=f"A synthetic profile: {', '.join(PROFILES)}."),
    ] = None,
    requests: Annotated[
        int, typer.Option("--requests", help="Requests in a synthetic trace.")
    ] = 5_000,
    seed: Annotated[int, typer.Option("--seed", help="A synthetic trace's seed.")] = 0,
    plan: Annotated[
        list[str] | None,
        typer.Option("--plan", help="CONN=KNOWN_PLAN (e.g. plan=claude-max-5x); repeatable."),
    ] = None,
    window: Annotated[
        list[str] | None,
        typer.Option(
            "--window",
            help="CONN:NAME:LENGTH:CAPACITY:UNIT[:ALIGNMENT], e.g. plan:5h:5h:45:requests."
            " LENGTH: seconds or 30m, 5h, 7d; UNIT: tokens, requests or cost (list-price"
            " USD); ALIGNMENT: first_use (default), fixed, fixed@EPOCH, midnight or midnight@ZONE;"
            " repeatable, and it replaces the connection's --plan or default.",
        ),
    ] = None,
    accounts: Annotated[
        list[str] | None,
        typer.Option(
            "--accounts",
            help="CONN=N: replay plan connection CONN as N accounts with staggered windows"
            " (CONN-1 to CONN-N); repeatable.",
        ),
    ] = None,
    policies: Annotated[
        str | None,
        typer.Option(
            "--policies",
            help=f"Comma-separated policies to compare (default: {','.join(POLICY_NAMES)};"
            f" with --accounts: {','.join(POOL_POLICY_NAMES)},oracle; a pool STRATEGY,"
            " one of fill-first, soonest-reset, headroom, expiry-first, round-robin, takes"
            " +affinity and +no-wait; the oracle only with the whatif extra installed).",
        ),
    ] = None,
    fallback_cooldown: Annotated[
        float,
        typer.Option(
            "--fallback-cooldown", help="Seconds fallback-429 keeps off a plan after its 429."
        ),
    ] = FALLBACK_COOLDOWN_S,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write a plot (.png or .html).")
    ] = None,
) -> None:
    """Replay requests against plans and policies, and compare what each would have paid."""
    try:
        counts = account_counts(accounts or ())
    except FlagError as error:
        _fail(str(error))
    defaults = [*POOL_POLICY_NAMES, "oracle"] if counts else list(POLICY_NAMES)
    chosen = _policy_names(policies) if policies is not None else defaults
    left_out = _without_solver(chosen) if policies is None else []
    if not 0 < fallback_cooldown < math.inf:
        _fail(f"--fallback-cooldown {fallback_cooldown:g}: give a number of seconds above 0")
    if plot is not None:
        _check_plot(plot)
    _, settings = load_config(config)
    trace, source = _trace(
        settings, from_ledger, since, until, trace_file, synthetic, requests, seed
    )
    try:
        quotas, notes = plan_quotas(settings, build_roster(settings), plan or (), window or ())
    except (FlagError, PlanError) as error:
        _fail(str(error))
    notes = [*notes, *left_out]
    world = World(settings, quotas, PriceBook(settings.prices))
    pools = bool(counts) or any(is_pool_policy(name) is not None for name in chosen)
    if pools:
        try:
            world, trace = pool_world(world, counts, trace)
        except PlanError as error:
            _fail(f"--accounts: {error}")
        quotas = dict(world.plans)
    started = time.perf_counter()
    try:
        runs = _replay(trace, world, [_policy(name, fallback_cooldown) for name in chosen])
    except PlanError as error:
        # A plan only the replay can judge: more windows than its provider reports.
        _fail(str(error))
    elapsed = time.perf_counter() - started
    oracle = runs.get("oracle")
    figures = [measure(run, oracle) for run in runs.values()]
    pool_figures = (
        [measure_pool(run, trace, world, oracle) for run in runs.values()] if pools else []
    )
    if plot is not None:
        _write_plot(plot, list(runs.values()), trace, world)
    if as_json:
        payload = {
            "trace": {"source": source, "requests": len(trace), **span(trace)},
            "plans": describe(quotas),
            "notes": notes,
            "elapsed_s": elapsed,
            "policies": [figure.to_json() for figure in figures],
        }
        if pool_figures:
            payload["pools"] = [figure.to_json() for figure in pool_figures]
        typer.echo(json.dumps(payload, indent=2, allow_nan=False))
        return
    print_report(out, figures, trace, source, describe(quotas), notes, elapsed)
    if pool_figures:
        out.print(pool_table(pool_figures))


def _policy_names(policies: str) -> list[str]:
    names = [name.strip() for name in policies.split(",") if name.strip()]
    unknown = [n for n in names if n not in POLICY_NAMES and is_pool_policy(n) is None]
    if unknown or not names:
        _fail(
            f"--policies {policies}: choose from {', '.join(POLICY_NAMES)}, or"
            " STRATEGY[+affinity][+no-wait] (see --help)"
        )
    return list(dict.fromkeys(names))


def _without_solver(chosen: list[str]) -> list[str]:
    """Drop the oracle from the default policies when its solver is not installed; the
    note that says so, or nothing."""
    try:
        import rungway.whatif.oracle  # noqa: F401, PLC0415 - needs the whatif extra
    except ImportError:
        chosen.remove("oracle")
        return ["the oracle is left out: its solver needs pip install 'rungway[whatif]'"]
    return []


def _policy(name: str, fallback_cooldown: float) -> Policy:
    if name == "oracle":
        try:
            from rungway.whatif.oracle import Oracle  # noqa: PLC0415 - needs the whatif extra
        except ImportError:
            _fail(
                "the oracle needs the whatif extra: pip install 'rungway[whatif]'"
                " (or leave it out with --policies)"
            )
        return Oracle()
    factories: dict[str, Callable[[], Policy]] = {
        "ladder": LadderPolicy,
        "always-key": AlwaysKey,
        "fallback-429": lambda: FallbackOn429(fallback_cooldown),
        "ttl-180s": TtlCached,
    }
    factory = factories.get(name)
    if factory is not None:
        return factory()
    pool = is_pool_policy(name)
    assert pool is not None, "checked by _policy_names"
    return pool


def _trace(  # noqa: PLR0917 - the trace flags, checked together
    settings: Settings,
    from_ledger: bool,
    since: str | None,
    until: str | None,
    trace_file: Path | None,
    synthetic: str | None,
    requests: int,
    seed: int,
) -> tuple[Trace, str]:
    given = [from_ledger, trace_file is not None, synthetic is not None]
    if sum(given) != 1:
        _fail("give the trace with exactly one of --from-ledger, --trace FILE or --synthetic")
    if (since or until) and not from_ledger:
        _fail("--since and --until bound --from-ledger only")
    try:
        if trace_file is not None:
            return read_jsonl(trace_file), str(trace_file)
        if synthetic is not None:
            if requests < 1:
                _fail(f"--requests {requests}: a trace needs at least 1 request")
            return generate(synthetic, requests=requests, seed=seed), f"synthetic {synthetic}"
        return _ledger_trace(settings, _instant("--since", since), _instant("--until", until))
    except (TraceError, OSError) as error:
        _fail(str(error))


def _ledger_trace(
    settings: Settings, since: float | None, until: float | None
) -> tuple[Trace, str]:
    bounds = {"since": since or 0.0, "until": until or math.inf}
    reader = postgres_reader(settings)
    found: LedgerTrace
    if reader is not None:
        try:
            found = read_postgres_trace(reader, **bounds)
        except LedgerUnavailable as error:
            _fail(str(error))
        source = f"ledger in postgres at {reader.address}"
    else:
        path = settings.ledger.path or default_ledger_path()
        found = read_ledger_trace(path, **bounds)
        source = f"ledger {path}"
    if not found.trace:
        _fail(f"the {source} holds no requests to replay in that period")
    skipped = found.refused + found.unrecorded
    if skipped:
        source += f" ({skipped} rows without tokens left out)"
    return found.trace, source


def _instant(option: str, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        _fail(f"{option} {value}: give an ISO date or date and time, e.g. 2026-11-01T09:00")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()


def _replay(trace: Trace, world: World, chosen: list[Policy]) -> dict[str, PolicyRun]:
    runs: dict[str, PolicyRun] = {}
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,}/{task.total:,}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=len(trace) * len(chosen) < _PROGRESS_FROM,
    ) as progress:
        for policy in chosen:
            task = progress.add_task(f"replaying {policy.name}", total=len(trace))

            def advance(count: int, task: Any = task) -> None:
                progress.advance(task, count)

            run = policy.run(trace, world, advance)
            if not run.times:
                run = replace(run, times=tuple(request.at for request in trace))
            runs[policy.name] = run
    return runs


def _check_plot(path: Path) -> None:
    from rungway.whatif.plot import PlotError, check_plot_path  # noqa: PLC0415 - optional

    try:
        check_plot_path(path)
    except PlotError as error:
        _fail(str(error))


def _write_plot(path: Path, runs: list[PolicyRun], trace: Trace, world: World) -> None:
    from rungway.whatif.plot import PlotError, write_plot  # noqa: PLC0415 - optional

    try:
        write_plot(path, runs, trace, world.plans)
    except (PlotError, OSError) as error:
        _fail(f"--plot {path}: {error}")
    err.print(f"plot written to {escape(str(path))}", highlight=False)


def _fail(message: str) -> NoReturn:
    err.print(f"[bold red]rungway whatif:[/] {escape(message)}", highlight=False)
    raise typer.Exit(2)
