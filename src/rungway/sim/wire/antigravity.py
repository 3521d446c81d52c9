"""Antigravity (Cloud Code for Google's Antigravity clients) as a simulated upstream serves it.

The wire is Code Assist's (`code_assist.py`) with Antigravity's fields, as two open
gateways send them (docs/provider-signals.md A6.3):
- `generateContent`, `streamGenerateContent?alt=sse` and `countTokens` at
  `/v1internal:<method>`; a generation envelope is `{"project", "model", "userAgent":
  "antigravity", "requestType", "requestId", "request": {..., "sessionId"?},
  "enabledCreditTypes"?}` and each reply `{"response", "traceId", "remainingCredits"?}`;
- `loadCodeAssist` (`metadata.ideType: ANTIGRAVITY`) names the project, the tiers and the
  credits (`paidTier.availableCredits`); `onboardUser` takes `tier_id` and is done at once;
- `retrieveUserQuota` and `fetchAvailableModels` report each model's bucket
  (`remainingFraction`, omitted once spent, and `resetTime`), read off the windows that
  generation spends under the scenario's clock.

Checks, in order: the bearer token (401), the client (403 unless the user agent is an
Antigravity client's: Google's terms allow no other, `antigravity.clients: any` lifts it), the
envelope (400), the project (403), the model's bucket (429 `QUOTA_EXHAUSTED`, or
`RATE_LIMIT_EXCEEDED` for a bucket under an hour). A request that asks to spend credits
past a spent bucket is served and charged `per_request` credits while the balance holds
the minimum, else refused 429 `INSUFFICIENT_G1_CREDITS_BALANCE`.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass
from typing import Any

from rungway.sim.antigravity_spec import AntigravityCredits, AntigravitySpec
from rungway.sim.exchange import RecordedRequest, Reply, json_reply
from rungway.sim.faults import FaultQueue
from rungway.sim.quota.google_errors import (
    antigravity_quota_exceeded,
    client_refused,
    credits_spent,
    error_reply,
    invalid_argument,
)
from rungway.sim.quota.windows import Admission, QuotaBook, WindowReading, rfc3339
from rungway.sim.scenario import CodeAssistSpec, Scenario
from rungway.sim.tally import Tally
from rungway.sim.wire.api import WireApi
from rungway.sim.wire.code_assist import GENERATE, PREFIX, STREAM, CodeAssistDialect
from rungway.sim.wire.gemini_api import BAD_JSON, GoogleRequest
from rungway.sim.wire.gemini_content import prompt_tokens
from rungway.sim.wire.serving import GenerationRequest, GenerationService

CLIENT_AGENT = "antigravity/"
CREDIT_TYPE = "GOOGLE_ONE_AI"
REQUEST_TYPES = frozenset({"agent", "image_gen", "web_search"})


@dataclass(frozen=True, slots=True)
class AntigravityRequest(GoogleRequest):
    """A generation request and the credits it was served on (None: on its quota)."""

    credits_left: int | None = None


class AntigravityDialect(CodeAssistDialect):
    """Code Assist's envelope with Antigravity's fields, its client check and credits."""

    def __init__(self, scenario: Scenario, book: QuotaBook) -> None:
        super().__init__(scenario)
        self.login = scenario.antigravity or AntigravitySpec()
        # Code Assist's checks read the project the requests must name from here.
        self.settings = CodeAssistSpec(project=self.login.project)
        self._book = book
        self._lock = threading.Lock()
        self.balance = 0
        self.reset()

    def refuses_client(self, request: RecordedRequest) -> bool:
        """True when the request's user agent is not an Antigravity client's."""
        if self.login.clients == "any":
            return False
        return not (request.header("user-agent") or "").startswith(CLIENT_AGENT)

    def parse_generation(self, request: RecordedRequest) -> GenerationRequest | Reply:
        """Token, client, Antigravity's envelope fields, then Code Assist's checks and the
        model's bucket (or the credits that pay past it)."""
        refused = self.authenticate(request)
        if refused is not None:
            return refused
        if self.refuses_client(request):
            return client_refused()
        envelope = request.body
        if not isinstance(envelope, dict):
            return invalid_argument(BAD_JSON, violation=True)
        wrong = _envelope_problem(envelope)
        if wrong is not None:
            return invalid_argument(wrong, violation=True)
        parsed = super().parse_generation(request)
        if isinstance(parsed, Reply):
            return parsed
        assert isinstance(parsed, GoogleRequest)
        readings = self._book.peek(parsed.model)
        spent = [reading for reading in readings.readings if reading.spent]
        if not spent:
            return _antigravity(parsed, None)
        asked = CREDIT_TYPE in (envelope.get("enabledCreditTypes") or ())
        credits = self.login.credits
        if not asked or credits is None:
            # Soft windows (a login with credits) never refuse: the bucket's answer is here.
            return antigravity_quota_exceeded(parsed.model, spent, readings.now)
        left = self._spend(credits)
        if left is None:
            return credits_spent(parsed.model)
        return _antigravity(parsed, left)

    def _spend(self, credits: AntigravityCredits) -> int | None:
        with self._lock:
            if self.balance < max(credits.minimum, credits.per_request):
                return None
            self.balance -= credits.per_request
            return self.balance

    def wrap(self, request: GoogleRequest, payload: dict[str, Any]) -> dict[str, Any]:
        """`{"response", "traceId"}`, with `remainingCredits` on a credit-paid request."""
        wrapped: dict[str, Any] = {"response": payload, "traceId": request.trace_id}
        left = request.credits_left if isinstance(request, AntigravityRequest) else None
        if left is not None:
            wrapped["remainingCredits"] = [{"creditType": CREDIT_TYPE, "creditAmount": str(left)}]
        return wrapped

    def quota_rejection(self, request: GenerationRequest, admission: Admission) -> Reply:
        """The bucket's 429 when admission refuses (a login without credits)."""
        return antigravity_quota_exceeded(request.model, admission.rejected, admission.now)

    def reset(self) -> None:
        """Give the login back the credits the scenario starts with."""
        credits = self.login.credits
        with self._lock:
            self.balance = credits.balance if credits is not None else 0

    def available_credits(self) -> list[dict[str, str]]:
        """`paidTier.availableCredits` now."""
        credits = self.login.credits
        if credits is None:
            return []
        with self._lock:
            amount = self.balance
        return [
            {
                "creditType": CREDIT_TYPE,
                "creditAmount": str(amount),
                "minimumCreditAmountForUsage": str(credits.minimum),
            }
        ]


def _antigravity(request: GoogleRequest, credits_left: int | None) -> AntigravityRequest:
    fields = {name: getattr(request, name) for name in request.__dataclass_fields__}
    return AntigravityRequest(**fields, credits_left=credits_left)


def _envelope_problem(envelope: dict[str, Any]) -> str | None:
    if envelope.get("userAgent") != "antigravity":
        return '* userAgent: must be "antigravity"\n'
    if envelope.get("requestType") not in REQUEST_TYPES:
        return "* requestType: must be one of " + ", ".join(sorted(REQUEST_TYPES)) + "\n"
    request_id = envelope.get("requestId")
    if not isinstance(request_id, str) or not request_id:
        return "* requestId: requestId is not specified\n"
    types = envelope.get("enabledCreditTypes")
    if types is not None and not (isinstance(types, list) and all(t == CREDIT_TYPE for t in types)):
        return f"* enabledCreditTypes: only {CREDIT_TYPE} is known\n"
    return None


class AntigravityApi(WireApi[AntigravityDialect]):
    """Routes requests to the Antigravity methods of one simulated upstream."""

    generation_paths = frozenset({GENERATE, STREAM})

    def __init__(
        self, scenario: Scenario, book: QuotaBook, faults: FaultQueue, tally: Tally
    ) -> None:
        dialect = AntigravityDialect(scenario, book)
        super().__init__(
            scenario, dialect, GenerationService(scenario, dialect, book, faults, tally)
        )
        self._book = book

    def reset(self) -> None:
        """Restore the scenario's credit balance (`SimUpstream.reset`)."""
        self._dialect.reset()

    def route(self, request: RecordedRequest) -> Reply:
        """countTokens, loadCodeAssist, onboardUser, retrieveUserQuota and
        fetchAvailableModels, else Google's 404."""
        methods = {
            "countTokens": self._count_tokens,
            "loadCodeAssist": self._load,
            "onboardUser": self._onboard,
            "retrieveUserQuota": self._quota,
            "fetchAvailableModels": self._models,
        }
        name = request.path.removeprefix(PREFIX) if request.path.startswith(PREFIX) else ""
        method = methods.get(name)
        if method is None or request.method != "POST":
            return error_reply(404, "Requested entity was not found.")
        refused = self._dialect.authenticate(request)
        if refused is not None:
            return refused
        if name == "countTokens" and self._dialect.refuses_client(request):
            return client_refused()
        body = request.body
        if not isinstance(body, dict):
            return invalid_argument(BAD_JSON, violation=True)
        return method(body)

    def _count_tokens(self, body: dict[str, Any]) -> Reply:
        inner = body.get("request")
        if not isinstance(inner, dict):
            return invalid_argument("* request: request is not specified\n")
        spec = self._dialect.model(inner.get("model"))
        if isinstance(spec, Reply):
            return spec
        return json_reply(200, {"totalTokens": prompt_tokens(inner)})

    def _tier(self, *, default: bool) -> dict[str, Any]:
        login = self._dialect.login
        return {"id": login.tier, "name": login.tier_name, "isDefault": default}

    def _load(self, body: dict[str, Any]) -> Reply:
        metadata = body.get("metadata")
        if not isinstance(metadata, dict) or metadata.get("ideType") != "ANTIGRAVITY":
            return invalid_argument('* metadata.ideType: must be "ANTIGRAVITY"\n')
        login = self._dialect.login
        paid = {**self._tier(default=True), "availableCredits": self._dialect.available_credits()}
        payload = {
            "currentTier": self._tier(default=True),
            "paidTier": paid,
            "allowedTiers": [self._tier(default=True)],
            "cloudaicompanionProject": login.project,
        }
        return json_reply(200, payload)

    def _onboard(self, body: dict[str, Any]) -> Reply:
        login = self._dialect.login
        tier = body.get("tier_id")
        if tier != login.tier:
            return invalid_argument(f"Tier {tier!r} is not available to this user.")
        project = {"id": login.project, "name": login.project}
        operation = {"name": f"operations/{secrets.token_hex(8)}", "done": True}
        return json_reply(200, {**operation, "response": {"cloudaicompanionProject": project}})

    def _buckets(self) -> dict[str, dict[str, Any]]:
        # Each model's tightest window is its bucket; a model without one is unlimited.
        chosen: dict[str, WindowReading] = {}
        for reading in self._book.readings():
            for model in self._models_of(reading):
                held = chosen.get(model)
                if held is None or reading.utilization > held.utilization:
                    chosen[model] = reading
        return {model: _bucket(reading) for model, reading in chosen.items()}

    def _models_of(self, reading: WindowReading) -> list[str]:
        model = reading.spec.model
        return [model] if model is not None else [m.id for m in self._scenario.models]

    def _quota(self, body: dict[str, Any]) -> Reply:
        if body.get("project") != self._dialect.login.project:
            return error_reply(403, "The caller does not have permission")
        buckets = [{"modelId": model, **bucket} for model, bucket in self._buckets().items()]
        return json_reply(200, {"buckets": buckets})

    def _models(self, body: dict[str, Any]) -> Reply:
        buckets = self._buckets()
        models = {}
        for spec in self._scenario.models:
            quota = buckets.get(spec.id, {"remainingFraction": 1})
            entry: dict[str, Any] = {"displayName": spec.display_name or spec.id}
            entry["quotaInfo"] = quota
            if spec.max_output_tokens is not None:
                entry["maxOutputTokens"] = spec.max_output_tokens
            models[spec.id] = entry
        return json_reply(200, {"models": models})


def _bucket(reading: WindowReading) -> dict[str, Any]:
    bucket: dict[str, Any] = {"resetTime": rfc3339(reading.reset_at)}
    if not reading.spent:
        # Antigravity leaves the fraction out of a spent bucket.
        bucket["remainingFraction"] = reading.remaining / reading.capacity
    return bucket
