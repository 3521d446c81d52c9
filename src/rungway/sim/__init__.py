"""Simulated upstream providers: product code used by the demo, tests and benchmarks.

A `SimUpstream` serves one `Scenario` (the Anthropic Messages or OpenAI Chat
Completions wire API, a credential, models, quota windows and their rate-limit header
family) and can be told to misbehave with `Fault`s.
"""

from rungway.sim.control import SimState, WindowState
from rungway.sim.exchange import RecordedRequest
from rungway.sim.faults import (
    DisconnectFault,
    Fault,
    GarbageFault,
    HttpErrorFault,
    QuotaExhaustedFault,
    StreamErrorFault,
    TimeoutFault,
    parse_faults,
)
from rungway.sim.scenario import (
    AuthSpec,
    ClockSpec,
    ModelSpec,
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
    "ClockSpec",
    "DisconnectFault",
    "Fault",
    "GarbageFault",
    "HttpErrorFault",
    "ModelSpec",
    "ModelTally",
    "QuotaExhaustedFault",
    "RecordedRequest",
    "ResponseSpec",
    "Scenario",
    "SimState",
    "SimUpstream",
    "StreamErrorFault",
    "Tally",
    "TimeoutFault",
    "WindowSpec",
    "WindowState",
    "builtin_scenario",
    "builtin_scenario_names",
    "load_scenario",
    "parse_faults",
]
