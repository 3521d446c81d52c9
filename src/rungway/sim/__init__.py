"""Simulated upstream providers: product code used by the demo, tests and benchmarks.

A `SimUpstream` serves one `Scenario` (the Anthropic Messages, OpenAI Chat Completions or
Responses, Gemini or Gemini Code Assist wire API, a credential, models, quota windows,
their rate-limit header family and the provider's usage endpoint: Claude, Codex, Copilot,
Gemini or OpenRouter) and can be told to misbehave with `Fault`s.

The parts are grouped by what they simulate: `wire/` the APIs served, `quota/` the
windows, header families and credits that limit them, `usage/` the providers' usage
endpoints and `oauth/` the token endpoints. The modules here are the entry points
(`server`, `pool` for several accounts of one plan, `scenario`, `control`, `canned`) and
what every group shares (`exchange`, `credential`, `faults`, `tally`, and `prompt_cache`:
each account's cached prompt prefixes, a pure model the what-if replay can run too).
"""

from rungway.sim.control import SimState, WindowState
from rungway.sim.exchange import RecordedRequest
from rungway.sim.faults import (
    DisconnectFault,
    Fault,
    GarbageFault,
    HttpErrorFault,
    QuotaExhaustedFault,
    StallFault,
    StreamErrorFault,
    TimeoutFault,
    parse_faults,
)
from rungway.sim.pool import SimPool, pool_accounts
from rungway.sim.prompt_cache import CacheRules, CacheUse, PromptCache
from rungway.sim.quota.credits import CreditState
from rungway.sim.scenario import (
    AuthSpec,
    ClockSpec,
    CodexCreditsSpec,
    CodexSpec,
    CopilotSpec,
    CreditsSpec,
    ModelSpec,
    PoolSpec,
    ResponseSpec,
    Scenario,
    WindowSpec,
    builtin_scenario,
    builtin_scenario_names,
    load_scenario,
)
from rungway.sim.server import SimUpstream
from rungway.sim.tally import ModelTally, Tally

__all__ = [
    "AuthSpec",
    "CacheRules",
    "CacheUse",
    "ClockSpec",
    "CodexCreditsSpec",
    "CodexSpec",
    "CopilotSpec",
    "CreditState",
    "CreditsSpec",
    "DisconnectFault",
    "Fault",
    "GarbageFault",
    "HttpErrorFault",
    "ModelSpec",
    "ModelTally",
    "PoolSpec",
    "PromptCache",
    "QuotaExhaustedFault",
    "RecordedRequest",
    "ResponseSpec",
    "Scenario",
    "SimPool",
    "SimState",
    "SimUpstream",
    "StallFault",
    "StreamErrorFault",
    "Tally",
    "TimeoutFault",
    "WindowSpec",
    "WindowState",
    "builtin_scenario",
    "builtin_scenario_names",
    "load_scenario",
    "parse_faults",
    "pool_accounts",
]
