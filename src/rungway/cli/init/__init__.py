"""`rungway init`: a starter config from what this machine has (see `command`)."""

from rungway.cli.init.command import init

__all__ = ["init"]
