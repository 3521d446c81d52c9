"""OpenRouter: Chat Completions with its own credit errors and key endpoint (`adapter.py`)."""

from __future__ import annotations

from rungway.adapters.base import ProviderEntry
from rungway.adapters.openrouter.adapter import OpenRouterAdapter

PROVIDERS = {
    "openrouter": ProviderEntry(OpenRouterAdapter(), "https://openrouter.ai/api/v1"),
}
"""The registry row of OpenRouter."""
