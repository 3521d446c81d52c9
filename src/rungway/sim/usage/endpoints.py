"""Which provider's usage endpoint a scenario serves (its `usage_endpoint`)."""

from __future__ import annotations

from rungway.sim.credential import Authenticate
from rungway.sim.quota.credits import CreditLedger
from rungway.sim.quota.windows import QuotaBook
from rungway.sim.scenario import Scenario
from rungway.sim.usage.claude import claude_usage
from rungway.sim.usage.codex import codex_usage
from rungway.sim.usage.copilot import copilot_usage
from rungway.sim.usage.gemini import gemini_quota
from rungway.sim.usage.glm import glm_quota
from rungway.sim.usage.kimi import kimi_usages
from rungway.sim.usage.minimax import minimax_remains
from rungway.sim.usage.openrouter import openrouter_key
from rungway.sim.usage.reads import SimUsageEndpoint


def build_usage_endpoint(
    scenario: Scenario,
    book: QuotaBook,
    authenticate: Authenticate,
    ledger: CreditLedger | None,
) -> SimUsageEndpoint | None:
    """The scenario's usage endpoint over `book` (and `ledger`), or None.

    `authenticate` is the wire API's own credential check; the Claude and Codex
    endpoints share it with inference, the others answer in their own error shapes.
    """
    kind = scenario.usage_endpoint
    if kind == "claude":
        return claude_usage(scenario, book, authenticate)
    if kind == "codex":
        return codex_usage(scenario, book, authenticate)
    if kind == "copilot":
        return copilot_usage(scenario, book)
    if kind == "gemini":
        return gemini_quota(scenario, book)
    if kind == "glm":
        return glm_quota(scenario, book)
    if kind == "kimi":
        return kimi_usages(scenario, book)
    if kind == "minimax":
        return minimax_remains(scenario, book)
    if kind == "openrouter" and ledger is not None:
        return openrouter_key(scenario, book, ledger)
    return None
