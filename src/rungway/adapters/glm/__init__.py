"""The GLM Coding Plan (Z.ai): Chat Completions at its coding endpoint and Anthropic
Messages at `/api/anthropic` (`adapter.py`), its
quota endpoint and 429 business codes read in `rungway.quota.glm`, simulated by the
`glm-plan` scenario (`rungway.sim.wire.glm`, `rungway.sim.usage.glm`)."""

from __future__ import annotations

from rungway.adapters.base import ProviderEntry
from rungway.adapters.glm.adapter import (
    ANTHROPIC_BASE_URL,
    DEFAULT_BASE_URL,
    GlmAnthropicAdapter,
    GlmCodingAdapter,
)

PROVIDERS = {
    "glm-coding": ProviderEntry(GlmCodingAdapter(), DEFAULT_BASE_URL),
    "glm-coding-anthropic": ProviderEntry(GlmAnthropicAdapter(), ANTHROPIC_BASE_URL),
}
"""The registry rows of the GLM Coding Plan: its Chat Completions endpoint, and its Messages
endpoint (where Claude Code is pointed), over one plan."""
