"""Kimi Code (Moonshot): Anthropic Messages at `api.kimi.com/coding` and Chat Completions at
`api.kimi.com/coding/v1` (`adapter.py`), its usage endpoint and booster wallet read in
`rungway.quota.kimi`, simulated by the `kimi-plan` scenario (`rungway.sim.wire.kimi_code`,
`rungway.sim.usage.kimi`)."""

from __future__ import annotations

from rungway.adapters.base import ProviderEntry
from rungway.adapters.kimi_code.adapter import (
    CHAT_BASE_URL,
    DEFAULT_BASE_URL,
    KimiCodeAdapter,
    KimiCodeChatAdapter,
)

PROVIDERS = {
    "kimi-code": ProviderEntry(KimiCodeAdapter(), DEFAULT_BASE_URL),
    "kimi-code-openai": ProviderEntry(KimiCodeChatAdapter(), CHAT_BASE_URL),
}
"""The registry rows of a Kimi Code plan: its Messages endpoint, and its Chat Completions
endpoint, over one plan."""
