"""What `rungway doctor` reports: one finding per checked thing, with its level and fix."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from rich.console import Console
from rich.markup import escape


class Level(StrEnum):
    """How a finding bears on running the gateway."""

    OK = "OK"
    WARN = "WARN"
    FAIL = "FAIL"


@dataclass(frozen=True, slots=True)
class Finding:
    """One checked thing: how it stands, what was seen, and what to do about it."""

    level: Level
    subject: str
    message: str
    fix: str = ""


_STYLE = {Level.OK: "green", Level.WARN: "yellow", Level.FAIL: "bold red"}


def show(finding: Finding, console: Console) -> None:
    """One line for the finding, and a `fix:` line under a WARN or FAIL."""
    style = _STYLE[finding.level]
    head = f"[{style}]{finding.level.value:<4}[/] {escape(finding.subject)}: "
    console.print(head + escape(finding.message), highlight=False)
    if finding.fix and finding.level is not Level.OK:
        console.print(f"     fix: {escape(finding.fix)}", highlight=False)
