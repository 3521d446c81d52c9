"""The GLM Coding Plan (Z.ai): Chat Completions at its coding endpoint (`adapter.py`), its
quota endpoint and 429 business codes read in `rungway.quota.glm`, simulated by the
`glm-plan` scenario (`rungway.sim.wire.glm`, `rungway.sim.usage.glm`)."""

from __future__ import annotations

from rungway.adapters.base import ProviderEntry
from rungway.adapters.glm.adapter import DEFAULT_BASE_URL, GlmCodingAdapter

PROVIDERS = {"glm-coding": ProviderEntry(GlmCodingAdapter(), DEFAULT_BASE_URL)}
"""The registry row of the GLM Coding Plan."""
