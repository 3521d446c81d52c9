"""What a simulated upstream of a plan's provider answers: its quota headers, and its 429.

A replay does not send anything: a plan connection's answer is made from its `Allowance`
by the simulated upstreams' own code, the header family (`sim/quota`) of the provider's
built-in scenario and its wire dialect's 429, so the gateway's adapters read it as they
read a live answer. Which scenario stands for a provider:

- `anthropic` (a Claude plan login): `claude-plan`, unified headers, at most two
  account-wide windows, which the headers name `5h` and `7d` (shorter first);
- `codex`: `codex-plan`, `x-codex-*` primary and secondary windows (shorter first);
- `copilot`: `copilot-seat`, no quota headers;
- `gemini-code-assist`: `gemini-code-assist`, no quota headers, Cloud Code's 429;
- `glm-coding` (and `glm-coding-anthropic`): `glm-plan`, no quota headers, Z.ai's 429 with
  a business code and the reset in its message;
- `kimi-code` (and `kimi-code-openai`): `kimi-plan`, no quota headers, Kimi's 403
  `access_terminated_error` naming the spent window but not its reset;
- `minimax-token-plan`: `minimax-plan`, no quota headers, MiniMax's 429 with code 2056 and
  the reset in its message;
- anything else: an OpenAI-compatible upstream without quota headers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rungway.clock import FakeClock
from rungway.sim.quota.header_families import header_writer
from rungway.sim.quota.windows import Admission, HeaderWriter
from rungway.sim.scenario import Scenario, builtin_scenario, load_scenario
from rungway.sim.wire.anthropic_api import AnthropicDialect
from rungway.sim.wire.code_assist import CodeAssistDialect
from rungway.sim.wire.gemini_api import GoogleRequest
from rungway.sim.wire.glm import GlmDialect
from rungway.sim.wire.kimi_code import KimiMessagesDialect
from rungway.sim.wire.minimax import MiniMaxDialect
from rungway.sim.wire.openai_api import OpenAIDialect
from rungway.sim.wire.responses_api import ResponsesDialect
from rungway.sim.wire.serving import Dialect, GenerationRequest
from rungway.whatif.plans import PlanError, PlanQuota

__all__ = ["Answer", "SimulatedUpstream"]

_SCENARIOS = {
    "anthropic": "claude-plan",
    "codex": "codex-plan",
    "copilot": "copilot-seat",
    "gemini-code-assist": "gemini-code-assist",
    "glm-coding": "glm-plan",
    "glm-coding-anthropic": "glm-plan",
    "kimi-code": "kimi-plan",
    "kimi-code-openai": "kimi-plan",
    "minimax-token-plan": "minimax-plan",
}
_TWO_WINDOWS = {"anthropic": ("5h", "7d"), "codex": ("5h", "7d")}


@dataclass(frozen=True, slots=True)
class Answer:
    """What the upstream answered: its status, headers (lower-case names) and body."""

    status: int
    headers: Mapping[str, str]
    body: bytes = b""


class SimulatedUpstream:
    """The answers a plan connection's provider would send, from its windows' state."""

    __slots__ = ("_dialect", "_google", "_writer", "header_names")

    def __init__(self, provider: str, quota: PlanQuota) -> None:
        self.header_names = _header_names(provider, quota)
        scenario = load_scenario(builtin_scenario(_SCENARIOS.get(provider, "local-ollama")))
        # The scenario's own windows are replaced by the plan's, for the dialects that
        # read them (a Copilot seat's premium window).
        scenario = scenario.model_copy(update={"windows": ()})
        self._writer: HeaderWriter = header_writer(scenario)
        self._dialect = _dialect(scenario)
        self._google = scenario.api in ("gemini", "code-assist")

    def success(self, admission: Admission) -> Answer:
        """The headers of an admitted request's answer."""
        return Answer(200, _folded(self._writer(admission)))

    def refusal(self, model: str, admission: Admission) -> Answer:
        """The provider's 429 for a request an exhausted window refused."""
        request_type = GoogleRequest if self._google else GenerationRequest
        request = request_type(
            model=model, stream=False, max_tokens=None, input_tokens=0, body={}, request_id="w"
        )
        reply = self._dialect.quota_rejection(request, admission)
        headers = _folded([*reply.headers, *self._writer(admission)])
        return Answer(reply.status, headers, reply.body)


def _dialect(scenario: Scenario) -> Dialect:
    if scenario.api == "anthropic":
        return AnthropicDialect(scenario)
    if scenario.api == "kimi-code":
        return KimiMessagesDialect(scenario)
    if scenario.api == "minimax":
        return MiniMaxDialect(scenario)
    if scenario.api == "code-assist":
        return CodeAssistDialect(scenario)
    # The clock only dates replies' bodies, which a replay never reads.
    if scenario.api == "responses":
        return ResponsesDialect(scenario, FakeClock(0.0))
    if scenario.api == "glm":
        return GlmDialect(scenario, FakeClock(0.0))
    return OpenAIDialect(scenario, FakeClock(0.0))


def _header_names(provider: str, quota: PlanQuota) -> dict[str, str]:
    """Each window's name in the provider's headers."""
    names = {window.name: window.name for window in quota.windows}
    fixed = _TWO_WINDOWS.get(provider)
    if fixed is None:
        return names
    shared = sorted((w for w in quota.windows if w.model is None), key=lambda w: w.length_s)
    if len(shared) > len(fixed):
        raise PlanError(
            f"plan {quota.connection_id!r}: a {provider} plan reports at most {len(fixed)}"
            f" account-wide windows ({' and '.join(fixed)}), not {len(shared)}"
        )
    for window, name in zip(shared, fixed, strict=False):
        names[window.name] = name
    return names


def _folded(headers: list[tuple[bytes, bytes]]) -> dict[str, str]:
    return {bytes(name).decode().lower(): value.decode() for name, value in headers}
