"""Which rate-limit header family a scenario's responses carry."""

from __future__ import annotations

from rungway.sim.exchange import Header
from rungway.sim.quota.codex import codex_headers
from rungway.sim.quota.windows import (
    Admission,
    HeaderWriter,
    apikey_headers,
    openai_headers,
    unified_headers,
)
from rungway.sim.scenario import Scenario


def _no_headers(admission: Admission) -> list[Header]:
    return []


def header_writer(scenario: Scenario) -> HeaderWriter:
    """The function that turns an admission into the scenario's quota headers."""
    family = scenario.quota_headers
    if family == "anthropic-unified":
        extra = scenario.extra_usage
        return lambda admission: unified_headers(admission, extra)
    if family == "anthropic-apikey":
        return apikey_headers
    if family == "openai":
        return openai_headers
    codex = scenario.codex_settings
    if family == "codex" and codex is not None:
        return lambda admission: codex_headers(admission, codex)
    return _no_headers
