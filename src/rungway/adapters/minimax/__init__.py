"""The MiniMax Token Plan: Anthropic Messages at `api.minimax.io/anthropic` (`adapter.py`),
its `remains` quota endpoints read in `rungway.quota.minimax`, simulated by the
`minimax-plan` scenario (`rungway.sim.wire.minimax`, `rungway.sim.usage.minimax`)."""

from __future__ import annotations

from rungway.adapters.base import ProviderEntry
from rungway.adapters.minimax.adapter import DEFAULT_BASE_URL, MiniMaxAdapter

PROVIDERS = {"minimax-token-plan": ProviderEntry(MiniMaxAdapter(), DEFAULT_BASE_URL)}
"""The registry row of a MiniMax Token Plan."""
