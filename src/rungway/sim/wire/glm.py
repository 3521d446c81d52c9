"""The GLM Coding Plan's endpoints as a simulated upstream serves them, over one plan.

Routes: `POST /api/coding/paas/v4/chat/completions` and `GET /api/coding/paas/v4/models`
(Z.ai's plan endpoint; `open.bigmodel.cn` serves the same paths in China), whose replies,
streams and usage are OpenAI's; and the Anthropic Messages API under `/api/anthropic`
(`POST /api/anthropic/v1/messages`, also `?beta=true`), where Claude Code is pointed. The
plan key is accepted as `Authorization: Bearer` or `x-api-key` on both.

Refusals are Z.ai's: every quota and rate error is HTTP 429 with a business code,
`{"error":{"code":"<code>","message":"..."}}`. A spent 5-hour window answers 1308 with
the reset as UTC+8 wall-clock time in Chinese, as recorded; a spent weekly or monthly
window answers 1310 with an ISO instant. The general pay-as-you-go endpoint
(`/api/paas/v4/chat/completions`) answers a plan key 429 1113, as Z.ai does: the plan
serves only its coding endpoint.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone

import orjson

from rungway.clock import Clock
from rungway.protocol.asgi import Receive, Scope, Send
from rungway.sim.exchange import RecordedRequest, Reply
from rungway.sim.faults import FaultQueue
from rungway.sim.quota.windows import Admission, QuotaBook
from rungway.sim.scenario import Scenario
from rungway.sim.tally import Tally
from rungway.sim.wire.anthropic_api import AnthropicApi, AnthropicDialect
from rungway.sim.wire.api import WireApi
from rungway.sim.wire.openai_api import OpenAIApi, OpenAIDialect
from rungway.sim.wire.plan_paths import bearer_or_api_key, unprefixed
from rungway.sim.wire.serving import Billing, GenerationRequest, GenerationService

BASE = "/api/coding/paas/v4"
ANTHROPIC_PREFIX = "/api/anthropic"
GENERAL_CHAT = "/api/paas/v4/chat/completions"
_CHINA_TIME = timezone(timedelta(hours=8))
_FIVE_HOURS_S = 5 * 3600.0


def business_error(code: str, message: str) -> Reply:
    """Z.ai's 429 with a business code."""
    return Reply(429, orjson.dumps({"error": {"code": code, "message": message}}))


def spent_reply(admission: Admission) -> Reply:
    """The 429 for a request a spent window refuses, naming the window and its reset."""
    binding = max(admission.rejected, key=lambda reading: reading.reset_at)
    # Whole seconds, rounded up: a client that waits until the named second finds the
    # window reset, never a moment short of it.
    reset = datetime.fromtimestamp(math.ceil(binding.reset_at), UTC)
    if binding.spec.length_s <= _FIVE_HOURS_S:
        wall = reset.astimezone(_CHINA_TIME).strftime("%Y-%m-%d %H:%M:%S")
        hours = max(1, round(binding.spec.length_s / 3600))
        return business_error("1308", f"已达到 {hours} 小时的使用上限。您的限额将在 {wall} 重置。")
    instant = reset.strftime("%Y-%m-%dT%H:%M:%SZ")
    return business_error(
        "1310", f"Weekly/Monthly Limit Exhausted. Your limit will reset at {instant}"
    )


def throttle_or_spent(admission: Admission) -> Reply:
    """1308/1310 for a spent window, else 1302 (too many requests at once)."""
    if admission.rejected:
        return spent_reply(admission)
    return business_error(
        "1302",
        "High concurrency usage of this API, please reduce concurrency or contact "
        "customer service to increase limits",
    )


def glm_authenticate(scenario: Scenario, request: RecordedRequest) -> Reply | None:
    """None when the plan key was sent (bearer or `x-api-key`), else Z.ai's 401."""
    if scenario.auth.kind == "none" or bearer_or_api_key(request) == scenario.auth.token:
        return None
    body = {"error": {"code": "1000", "message": "身份验证失败。"}}
    return Reply(401, orjson.dumps(body))


class GlmDialect(OpenAIDialect):
    """OpenAI Chat requests and replies, with Z.ai's key check and business-code refusals."""

    def authenticate(self, request: RecordedRequest) -> Reply | None:
        """None when the plan key was sent, else Z.ai's 401."""
        return glm_authenticate(self._scenario, request)

    def quota_rejection(self, request: GenerationRequest, admission: Admission) -> Reply:
        """1308/1310 for a spent window, else 1302 (too many requests at once)."""
        return throttle_or_spent(admission)


class GlmMessagesDialect(AnthropicDialect):
    """Anthropic Messages requests and replies, with Z.ai's key check and refusals. No client
    check: Z.ai was not seen to refuse any client (docs/provider-signals.md A10)."""

    def authenticate(self, request: RecordedRequest) -> Reply | None:
        """None when the plan key was sent, else Z.ai's 401."""
        return glm_authenticate(self._scenario, request)

    def quota_rejection(self, request: GenerationRequest, admission: Admission) -> Reply:
        """1308/1310 for a spent window, else 1302 (too many requests at once)."""
        return throttle_or_spent(admission)


class _Messages(AnthropicApi):
    def __init__(
        self, scenario: Scenario, dialect: GlmMessagesDialect, service: GenerationService
    ) -> None:
        WireApi.__init__(self, scenario, dialect, service)


class GlmApi(OpenAIApi):
    """The plan's coding endpoint; the general endpoint refuses the plan key."""

    dialect_class = GlmDialect
    generation_paths = frozenset({f"{BASE}/chat/completions"})

    def __init__(
        self,
        scenario: Scenario,
        clock: Clock,
        book: QuotaBook,
        faults: FaultQueue,
        tally: Tally,
        *,
        billing: Billing | None = None,
    ) -> None:
        super().__init__(scenario, clock, book, faults, tally, billing=billing)
        messages = GlmMessagesDialect(scenario)
        service = GenerationService(scenario, messages, book, faults, tally)
        # One log for both APIs: the sim's replies are the plan's, whichever API asked.
        service.replies = self._service.replies
        service.prompt_cache = self._service.prompt_cache
        self._messages = _Messages(scenario, messages, service)

    async def handle(
        self, scope: Scope, receive: Receive, send: Send, request: RecordedRequest
    ) -> None:
        """The Messages API under `/api/anthropic`, else the coding endpoint's routes."""
        inner = unprefixed(request, ANTHROPIC_PREFIX)
        if inner is not None:
            await self._messages.handle(scope, receive, send, inner)
        else:
            await super().handle(scope, receive, send, request)

    def route(self, request: RecordedRequest) -> Reply:
        """The model list, the general endpoint's refusal, else a 404."""
        if request.method == "GET" and request.path == f"{BASE}/models":
            return self._list_models(request)
        if request.method == "POST" and request.path == GENERAL_CHAT:
            refused = self._dialect.authenticate(request)
            if refused is not None:
                return refused
            return business_error(
                "1113", "Insufficient balance or no resource package. Please recharge."
            )
        body = {"timestamp": 0, "status": 404, "error": "Not Found", "path": request.path}
        return Reply(404, orjson.dumps(body))
