"""Providers whose service is gone for most of their users, and what replaced them.

A config that names one still loads and serves (a seat the service still serves keeps
working), but `init` no longer offers it, and `doctor`, the start-up banner and the
dashboard say it is retired and what to use instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Retirement:
    """When a provider's service stopped, what took its place, and where that is said."""

    since: str
    """The date it stopped, `YYYY-MM-DD`."""
    successor: str
    """The provider that serves its users now."""
    notice: str
    """One sentence for the operator."""
    source: str
    """Where the retirement is stated."""


RETIRED: Mapping[str, Retirement] = {
    "gemini-code-assist": Retirement(
        since="2026-06-18",
        successor="antigravity",
        notice=(
            "Google stopped serving the Gemini CLI and Gemini Code Assist to consumer plans on "
            "2026-06-18 and moved them to Antigravity (provider `antigravity`); whether "
            "Standard and Enterprise seats are still served is not confirmed"
        ),
        source="https://github.com/google-gemini/gemini-cli (its migration guide)",
    ),
}
"""Each retired provider, by its config name."""
