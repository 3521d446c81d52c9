"""The `rungway` command."""

from __future__ import annotations

import typer

from rungway.cli.connections import connections
from rungway.cli.demo import demo
from rungway.cli.doctor import doctor
from rungway.cli.explain import explain
from rungway.cli.init import init
from rungway.cli.serve import serve
from rungway.cli.sim_upstream import sim_upstream
from rungway.cli.spend import spend
from rungway.cli.status import status
from rungway.cli.whatif import whatif

app = typer.Typer(
    name="rungway",
    help="An LLM gateway that spends the AI plans you already pay for first.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("init")(init)
app.command("serve")(serve)
app.command("demo")(demo)
app.command("sim-upstream")(sim_upstream)
app.command("explain")(explain)
app.command("spend")(spend)
app.command("status")(status)
app.command("doctor")(doctor)
app.command("whatif")(whatif)
app.add_typer(connections, name="connections")


def main() -> None:
    """Entry point of the `rungway` script."""
    app()
