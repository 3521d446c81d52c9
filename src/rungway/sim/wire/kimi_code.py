"""Kimi Code as a simulated upstream: the Anthropic Messages and OpenAI Chat Completions
APIs under `/coding`, over one plan's windows (docs/provider-signals.md, Kimi Code).

Routes: `POST /coding/v1/messages` (also `?beta=true`), `POST
/coding/v1/messages/count_tokens`, `POST /coding/v1/chat/completions` and `GET
/coding/v1/models`; the usage endpoint, `GET /coding/v1/usages`, is `usage/kimi.py`. A key
is accepted as `x-api-key` or `Authorization: Bearer`. A spent plan answers 403
`access_terminated_error` on both APIs, unless the booster wallet pays for what is past it;
a request from `X-Msh-Platform: kimi_code_cli` is refused with the same status and type
and another message, as the service was seen to refuse that platform.
"""

from __future__ import annotations

import orjson

from rungway.clock import Clock
from rungway.protocol.asgi import Receive, Scope, Send
from rungway.sim.exchange import RecordedRequest, Reply, send_reply
from rungway.sim.faults import FaultQueue
from rungway.sim.quota.windows import Admission, QuotaBook
from rungway.sim.scenario import Scenario
from rungway.sim.tally import Tally
from rungway.sim.wire.anthropic_api import AnthropicApi, AnthropicDialect
from rungway.sim.wire.api import WireApi
from rungway.sim.wire.openai_api import OpenAIApi, OpenAIDialect
from rungway.sim.wire.plan_paths import bearer_or_api_key, unprefixed
from rungway.sim.wire.serving import GenerationRequest, GenerationService

PREFIX = "/coding"
REFUSED_PLATFORM = "kimi_code_cli"
INVALID_KEY = (
    "The API Key appears to be invalid or may have expired. Please verify your credentials "
    "and try again."
)
WRONG_CLIENT = (
    "Kimi For Coding is currently only available for Coding Agents such as Kimi CLI, Claude "
    "Code, Roo Code, Kilo Code, etc."
)
WEEKLY_SPENT = (
    "You've reached your weekly (7-day) usage limit. Your quota will reset when the current "
    "7-day window ends. To continue now, purchase extra usage or upgrade your plan: "
    "https://www.kimi.com/membership/subscription?tab=quota"
)
# Only the weekly and billing-cycle texts were recorded; the 5-hour one follows the weekly.
FIVE_HOUR_SPENT = (
    "You've reached your 5-hour usage limit. Your quota will reset when the current 5-hour "
    "window ends. To continue now, purchase extra usage or upgrade your plan: "
    "https://www.kimi.com/membership/subscription?tab=quota"
)
CYCLE_SPENT = (
    "You've reached your usage limit for this billing cycle. Your quota will be refreshed in "
    "the next cycle."
)
_DAY_S = 86_400.0


def kimi_error(status: int, error_type: str, message: str) -> Reply:
    """An error in Kimi's shape, `{"error": {"message", "type"}}`, on either API."""
    return Reply(status, orjson.dumps({"error": {"message": message, "type": error_type}}))


def kimi_authenticate(scenario: Scenario, request: RecordedRequest) -> Reply | None:
    """None when the request carries the plan's key, else Kimi's 401."""
    if scenario.auth.kind == "none" or bearer_or_api_key(request) == scenario.auth.token:
        return None
    return kimi_error(401, "invalid_authentication_error", INVALID_KEY)


def _refused_client(request: RecordedRequest) -> Reply | None:
    if (request.header("x-msh-platform") or "").strip() == REFUSED_PLATFORM:
        return kimi_error(403, "access_terminated_error", WRONG_CLIENT)
    return None


def spent_plan(admission: Admission) -> Reply:
    """The 403 of a spent plan, its message naming the window that binds longest."""
    blocking = admission.rejected or admission.readings
    length = max((reading.spec.length_s for reading in blocking), default=7 * _DAY_S)
    if length >= 6 * _DAY_S:
        message = WEEKLY_SPENT if length <= 8 * _DAY_S else CYCLE_SPENT
    else:
        message = FIVE_HOUR_SPENT
    return kimi_error(403, "access_terminated_error", message)


class KimiMessagesDialect(AnthropicDialect):
    """The Messages API as Kimi serves it: its key, its refusals."""

    def authenticate(self, request: RecordedRequest) -> Reply | None:
        """None when the plan's key was sent, else Kimi's 401."""
        return kimi_authenticate(self._scenario, request)

    def check_common(self, request: RecordedRequest) -> Reply | dict[str, object]:
        """The key, then the client, then the Messages API's own checks."""
        refused = self.authenticate(request) or _refused_client(request)
        return refused if refused is not None else super().check_common(request)

    def quota_rejection(self, request: GenerationRequest, admission: Admission) -> Reply:
        """A spent plan's 403 `access_terminated_error`."""
        return spent_plan(admission)


class KimiChatDialect(OpenAIDialect):
    """Chat Completions as Kimi serves it: its key, its refusals."""

    def authenticate(self, request: RecordedRequest) -> Reply | None:
        """None when the plan's key was sent, else Kimi's 401."""
        return kimi_authenticate(self._scenario, request)

    def parse_generation(self, request: RecordedRequest) -> GenerationRequest | Reply:
        """The key, then the client, then Chat Completions' own checks."""
        refused = self.authenticate(request) or _refused_client(request)
        return refused if refused is not None else super().parse_generation(request)

    def quota_rejection(self, request: GenerationRequest, admission: Admission) -> Reply:
        """A spent plan's 403 `access_terminated_error`."""
        return spent_plan(admission)


class _Messages(AnthropicApi):
    def __init__(
        self, scenario: Scenario, dialect: KimiMessagesDialect, service: GenerationService
    ) -> None:
        WireApi.__init__(self, scenario, dialect, service)


class _Chat(OpenAIApi):
    def __init__(
        self, scenario: Scenario, dialect: KimiChatDialect, service: GenerationService
    ) -> None:
        WireApi.__init__(self, scenario, dialect, service)


class KimiCodeApi(WireApi[KimiMessagesDialect]):
    """Routes `/coding/...` to the Messages or Chat Completions API over one quota book."""

    def __init__(
        self, scenario: Scenario, clock: Clock, book: QuotaBook, faults: FaultQueue, tally: Tally
    ) -> None:
        messages = KimiMessagesDialect(scenario)
        service = GenerationService(scenario, messages, book, faults, tally)
        super().__init__(scenario, messages, service)
        chat = KimiChatDialect(scenario, clock)
        chat_service = GenerationService(scenario, chat, book, faults, tally)
        # One log for both APIs: the sim's replies are the plan's, whichever API asked.
        chat_service.replies = service.replies
        chat_service.prompt_cache = service.prompt_cache
        self._messages = _Messages(scenario, messages, service)
        self._chat = _Chat(scenario, chat, chat_service)

    async def handle(
        self, scope: Scope, receive: Receive, send: Send, request: RecordedRequest
    ) -> None:
        """Answer one request under `/coding`, else Kimi's 404."""
        inner = unprefixed(request, PREFIX)
        if inner is None:
            await send_reply(send, kimi_error(404, "not_found_error", "Not Found"))
        elif inner.path.startswith(("/v1/chat/", "/v1/models")):
            await self._chat.handle(scope, receive, send, inner)
        else:
            await self._messages.handle(scope, receive, send, inner)
