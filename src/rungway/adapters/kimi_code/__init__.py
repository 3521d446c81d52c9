"""Kimi Code (Moonshot): Anthropic Messages at `api.kimi.com/coding` (`adapter.py`), its
usage endpoint and booster wallet read in `rungway.quota.kimi`, simulated by the
`kimi-plan` scenario (`rungway.sim.wire.kimi_code`, `rungway.sim.usage.kimi`)."""

from __future__ import annotations

from rungway.adapters.base import ProviderEntry
from rungway.adapters.kimi_code.adapter import DEFAULT_BASE_URL, KimiCodeAdapter

PROVIDERS = {"kimi-code": ProviderEntry(KimiCodeAdapter(), DEFAULT_BASE_URL)}
"""The registry row of a Kimi Code plan."""
