"""`python -m rungway`: the same as the `rungway` command."""

from rungway.cli.main import main

main()
