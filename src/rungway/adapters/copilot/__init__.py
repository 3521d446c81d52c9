"""GitHub Copilot seats: Chat Completions with an editor's identity (`adapter.py`)."""

from __future__ import annotations

from rungway.adapters.base import ProviderEntry
from rungway.adapters.copilot.adapter import CopilotAdapter

PROVIDERS = {
    "copilot": ProviderEntry(
        CopilotAdapter(),
        "https://api.githubcopilot.com",
        without_price_id="billed by seat and premium requests, never per token",
    ),
}
"""The registry row of a Copilot seat."""
