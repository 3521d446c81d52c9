"""The MiniMax Token Plan as a simulated upstream: the Anthropic Messages API under
`/anthropic`, over one plan's request windows (docs/provider-signals.md, MiniMax Token Plan).

Routes: `POST /anthropic/v1/messages` (also `?beta=true`) and `POST
/anthropic/v1/messages/count_tokens`; the quota endpoints are `usage/minimax.py`. A key is
accepted as `Authorization: Bearer` or `x-api-key`; any other is refused 401 "invalid api
key". A spent window answers 429 `rate_limit_error` whose message names the window, its
reset and MiniMax's code 2056; the plan never bills past it.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from rungway.protocol.asgi import Receive, Scope, Send
from rungway.sim.exchange import RecordedRequest, Reply, send_reply
from rungway.sim.faults import FaultQueue
from rungway.sim.quota.windows import Admission, QuotaBook
from rungway.sim.scenario import Scenario
from rungway.sim.tally import Tally
from rungway.sim.wire.anthropic_api import AnthropicApi, AnthropicDialect, error_reply
from rungway.sim.wire.api import WireApi
from rungway.sim.wire.plan_paths import bearer_or_api_key, unprefixed
from rungway.sim.wire.serving import GenerationRequest, GenerationService

PREFIX = "/anthropic"
PLAN_LIMIT_CODE = 2056
_DAY_S = 86_400.0


def window_spent_message(admission: Admission, title: str) -> str:
    """The 2056 message for the window that binds longest."""
    blocking = admission.rejected or admission.readings
    binding = max(blocking, key=lambda reading: reading.reset_at, default=None)
    if binding is None:
        return f"usage limit exceeded for Token Plan {title} ({PLAN_LIMIT_CODE})"
    spec = binding.spec
    which = "weekly" if spec.length_s >= 6 * _DAY_S else f"{spec.length_s / 3600:g}-hour"
    # Whole seconds, rounded up: a client that waits until then finds the window reset.
    resets = datetime.fromtimestamp(math.ceil(binding.reset_at), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return (
        f"usage limit exceeded, {which} usage limit reached for Token Plan {title} "
        f"({binding.used}/{spec.capacity} used), resets at {resets} ({PLAN_LIMIT_CODE})"
    )


class MiniMaxDialect(AnthropicDialect):
    """The Messages API as MiniMax serves it: a plan key, the 2056 refusal."""

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        settings = scenario.minimax_settings
        self._title = "Plus" if settings is None else settings.title

    def authenticate(self, request: RecordedRequest) -> Reply | None:
        """None when the plan's key was sent, else MiniMax's 401."""
        auth = self._scenario.auth
        if auth.kind == "none" or bearer_or_api_key(request) == auth.token:
            return None
        return error_reply(401, "authentication_error", "invalid api key")

    def quota_rejection(self, request: GenerationRequest, admission: Admission) -> Reply:
        """A spent window's 429, the reset in its message and no header."""
        message = window_spent_message(admission, self._title)
        return error_reply(429, "rate_limit_error", message, request.request_id)


class MiniMaxApi(WireApi[MiniMaxDialect]):
    """Routes `/anthropic/...` to the Messages API."""

    def __init__(
        self, scenario: Scenario, book: QuotaBook, faults: FaultQueue, tally: Tally
    ) -> None:
        dialect = MiniMaxDialect(scenario)
        service = GenerationService(scenario, dialect, book, faults, tally)
        super().__init__(scenario, dialect, service)
        self._messages = _Messages(scenario, dialect, service)

    async def handle(
        self, scope: Scope, receive: Receive, send: Send, request: RecordedRequest
    ) -> None:
        """Answer one request under `/anthropic`, else a 404."""
        inner = unprefixed(request, PREFIX)
        if inner is None:
            await send_reply(send, error_reply(404, "not_found_error", "Not Found"))
        else:
            await self._messages.handle(scope, receive, send, inner)


class _Messages(AnthropicApi):
    def __init__(
        self, scenario: Scenario, dialect: MiniMaxDialect, service: GenerationService
    ) -> None:
        WireApi.__init__(self, scenario, dialect, service)
