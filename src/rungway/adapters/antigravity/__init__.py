"""Antigravity, Google's plan of today for its consumer accounts: Code Assist's envelope
with Antigravity's fields and an Antigravity (`agy`) login (`adapter.py`); its login and
project in `rungway.credentials.antigravity` and `antigravity_project`, its quota read in
`rungway.quota.antigravity`, simulated by the `antigravity` scenario
(`rungway.sim.wire.antigravity`)."""

from __future__ import annotations

from rungway.adapters.antigravity.adapter import DEFAULT_BASE_URL, AntigravityAdapter
from rungway.adapters.base import ProviderEntry

PROVIDERS = {
    "antigravity": ProviderEntry(
        AntigravityAdapter(),
        DEFAULT_BASE_URL,
        without_price_id=(
            "it serves Google's, Anthropic's and OpenAI's models alike: each is priced by its "
            "name, the list price being what the plan saved"
        ),
    )
}
"""The registry row of Antigravity."""
