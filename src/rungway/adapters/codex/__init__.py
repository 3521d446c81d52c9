"""The ChatGPT plan's Codex backend: the Responses API behind a ChatGPT login (`adapter.py`).

Its quota readers (`x-codex-*` headers, the `usage_limit_reached` 429, `wham/usage`) are in
`rungway.quota`, which the simulated upstreams and the what-if replay share.
"""

from __future__ import annotations

from rungway.adapters.base import ProviderEntry
from rungway.adapters.codex.adapter import CodexAdapter

PROVIDERS = {
    "codex": ProviderEntry(CodexAdapter(), "https://chatgpt.com/backend-api/codex"),
}
"""The registry row of a ChatGPT plan through Codex."""
