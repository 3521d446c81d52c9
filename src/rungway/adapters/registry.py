"""The one table from provider to adapter and default base URL, assembled from the rows each
provider family's package declares (`PROVIDERS` in its `__init__.py`).

A provider lacking a billing catalog entry or a genai-prices id says why in its row;
`tests/unit/adapters/test_registry.py` keeps the rows, `config.Provider`, the catalog and
pricing in step. `README.md` here has the recipe for adding a provider.
"""

from __future__ import annotations

from rungway.adapters import (
    anthropic,
    antigravity,
    codex,
    copilot,
    gemini,
    glm,
    kimi_code,
    minimax,
    openai,
    openrouter,
)
from rungway.adapters.base import ProviderEntry

__all__ = [
    "PROVIDERS",
    "WITHOUT_CATALOG_ENTRY",
    "WITHOUT_PRICE_ID",
    "ProviderEntry",
    "provider_entry",
]

PROVIDERS: dict[str, ProviderEntry] = {
    **anthropic.PROVIDERS,
    **antigravity.PROVIDERS,
    **codex.PROVIDERS,
    **copilot.PROVIDERS,
    **gemini.PROVIDERS,
    **kimi_code.PROVIDERS,
    **minimax.PROVIDERS,
    **glm.PROVIDERS,
    **openai.PROVIDERS,
    **openrouter.PROVIDERS,
}

WITHOUT_CATALOG_ENTRY: dict[str, str] = {
    name: entry.without_catalog_entry
    for name, entry in PROVIDERS.items()
    if entry.without_catalog_entry is not None
}
"""Providers with no billing catalog entry, and why none is curated."""

WITHOUT_PRICE_ID: dict[str, str] = {
    name: entry.without_price_id
    for name, entry in PROVIDERS.items()
    if entry.without_price_id is not None
}
"""Providers with no genai-prices provider id, and why."""


def provider_entry(provider: str) -> ProviderEntry:
    """The entry for `provider`; config validation guarantees it exists."""
    return PROVIDERS[provider]
