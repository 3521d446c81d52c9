"""The `rungway` command."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperCommand, TyperGroup

from rungway.cli.serve import serve

if TYPE_CHECKING:
    # The click that typer ships and builds its commands with.
    from typer._click import Command, Context

_ON_DEMAND = {
    "init": ("rungway.cli.init", "init"),
    "demo": ("rungway.cli.demo", "demo"),
    "sim-upstream": ("rungway.cli.sim_upstream", "sim_upstream"),
    "explain": ("rungway.cli.explain", "explain"),
    "spend": ("rungway.cli.spend", "spend"),
    "status": ("rungway.cli.status", "status"),
    "doctor": ("rungway.cli.doctor", "doctor"),
    "whatif": ("rungway.cli.whatif", "whatif"),
    "connections": ("rungway.cli.connections", "connections"),
}
"""The commands but `serve`, whose modules are imported only when they are named: the
function that runs each (or the `typer.Typer` of a command group), by module and name."""
_LISTED = (
    "init",
    "serve",
    "demo",
    "sim-upstream",
    "explain",
    "spend",
    "status",
    "doctor",
    "whatif",
    "connections",
)
"""The order `rungway --help` lists the commands in; any others follow in the order added."""


class _OnDemand(TyperCommand):
    """Stands in for a command in `_ON_DEMAND` until it is asked for."""


class _Commands(TyperGroup):
    """The subcommands, with those in `_ON_DEMAND` built the first time they are asked for."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        added = {**self.commands, **{name: _OnDemand(name) for name in _ON_DEMAND}}
        order = [*(name for name in _LISTED if name in added), *added]
        self.commands = {name: added[name] for name in dict.fromkeys(order)}

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        # Deferred: the other commands' modules (the simulated upstreams, the replay, the
        # probes) would add ~80 ms to every start of `serve`, which uses none of them.
        if isinstance(self.commands.get(cmd_name), _OnDemand):
            module, name = _ON_DEMAND[cmd_name]
            found = getattr(import_module(module), name)
            # Built as `app` would have built it, had it been added there.
            whole = typer.Typer(add_completion=False)
            if isinstance(found, typer.Typer):
                whole.add_typer(found, name=cmd_name)
                self.commands[cmd_name] = typer.main.get_group(whole).commands[cmd_name]
            else:
                whole.command(cmd_name)(found)
                self.commands[cmd_name] = typer.main.get_command(whole)
        return super().get_command(ctx, cmd_name)


app = typer.Typer(
    name="rungway",
    cls=_Commands,
    help="An LLM gateway that spends the AI plans you already pay for first.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("serve")(serve)


@app.callback()
def _options() -> None:
    # Nothing to do before a command; with it the app stays a group of commands even
    # though `serve` is the only one added before it is run.
    pass


def main() -> None:
    """Entry point of the `rungway` script."""
    app()
