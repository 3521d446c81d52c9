"""Gemini Code Assist (cloudcode-pa.googleapis.com), the Gemini CLI's Google login, as a
simulated upstream serves it (docs/provider-signals.md A6.1).

Routes at `/v1internal:<method>`: `generateContent` and `streamGenerateContent` (`?alt=sse`)
take the envelope `{"model", "project", "user_prompt_id"?, "request": {...}}` and answer
`{"response": {...}, "traceId": "..."}`, each SSE event too; `countTokens` takes
`{"request": {"model": "models/x", "contents": [...]}}`; `loadCodeAssist` reports the
login's tier and project, and `onboardUser` is a long-running operation that is done at
once; `listExperiments` lists none and the global user setting names the login's project.
`retrieveUserQuota` is the scenario's usage endpoint (usage/gemini.py), read off the same
windows generation spends. The bearer token is checked first (401 `UNAUTHENTICATED`),
then the project (403 `PERMISSION_DENIED` when missing or not the login's).
"""

from __future__ import annotations

import secrets
from typing import Any

from rungway.sim.credential import credential_check
from rungway.sim.exchange import RecordedRequest, Reply, json_reply
from rungway.sim.faults import FaultQueue
from rungway.sim.quota.google_errors import (
    code_assist_quota_exceeded,
    error_reply,
    invalid_argument,
    project_denied,
    unauthenticated,
)
from rungway.sim.quota.windows import Admission, QuotaBook
from rungway.sim.scenario import CodeAssistSpec, ModelSpec, Scenario
from rungway.sim.tally import Tally
from rungway.sim.wire.api import WireApi
from rungway.sim.wire.gemini_api import (
    BAD_JSON,
    GoogleDialect,
    GoogleRequest,
    implicit_cache,
    max_tokens_refusal,
    new_response_id,
    query_params,
)
from rungway.sim.wire.gemini_content import CODE_ASSIST_FIELDS, prompt_tokens, read_request
from rungway.sim.wire.serving import GenerationRequest, GenerationService

PREFIX = "/v1internal:"
GENERATE = PREFIX + "generateContent"
STREAM = PREFIX + "streamGenerateContent"
ONBOARD_RESPONSE_TYPE = (
    "type.googleapis.com/google.internal.cloud.code.v1internal.OnboardUserResponse"
)
_TIER_NAMES = {
    "free-tier": "Gemini Code Assist for individuals",
    "legacy-tier": "Gemini Code Assist",
    "standard-tier": "Gemini Code Assist Standard",
}


def _tier(tier_id: str, *, default: bool) -> dict[str, Any]:
    return {
        "id": tier_id,
        "name": _TIER_NAMES[tier_id],
        "description": f"{_TIER_NAMES[tier_id]}, served by a simulated upstream.",
        # Only the paid tiers let the user pick their own Google Cloud project.
        "userDefinedCloudaicompanionProject": tier_id != "free-tier",
        "isDefault": default,
    }


class CodeAssistDialect(GoogleDialect):
    """Unwraps Code Assist's request envelope and wraps each reply in its own."""

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        settings = scenario.code_assist_settings
        self.settings = settings if settings is not None else CodeAssistSpec()
        self._authenticate = credential_check(scenario.auth, unauthenticated)

    def authenticate(self, request: RecordedRequest) -> Reply | None:
        """None when the bearer token is accepted, else Google's 401."""
        return self._authenticate(request)

    def model(self, name: object) -> ModelSpec | Reply:
        """A served model named with or without `models/`, or a 400/404."""
        if not isinstance(name, str) or not name:
            return invalid_argument("* model: model is not specified\n")
        spec = self._models.get(name.removeprefix("models/"))
        if spec is None:
            return error_reply(404, "Requested entity was not found.")
        return spec

    def wrap(self, request: GoogleRequest, payload: dict[str, Any]) -> dict[str, Any]:
        """`{"response": ..., "traceId": ...}`."""
        return {"response": payload, "traceId": request.trace_id}

    def parse_generation(self, request: RecordedRequest) -> GenerationRequest | Reply:
        """Check the token, the envelope and its project, then the inner request."""
        refused = self.authenticate(request)
        if refused is not None:
            return refused
        envelope = request.body
        if not isinstance(envelope, dict):
            return invalid_argument(BAD_JSON, violation=True)
        project = envelope.get("project")
        if project != self.settings.project:
            return project_denied(project if isinstance(project, str) else None)
        spec = self.model(envelope.get("model"))
        if isinstance(spec, Reply):
            return spec
        inner = envelope.get("request")
        if not isinstance(inner, dict):
            return invalid_argument("* request: request is not specified\n")
        prompt = read_request(inner, CODE_ASSIST_FIELDS, self._scenario.response.thought_tokens)
        if isinstance(prompt, Reply):
            return prompt
        refusal = max_tokens_refusal(spec, prompt)
        if refusal is not None:
            return refusal
        rules, boundaries = implicit_cache(spec.id, prompt, inner)
        return GoogleRequest(
            model=spec.id,
            stream=request.path == STREAM,
            max_tokens=prompt.max_tokens,
            input_tokens=prompt.input_tokens,
            body=inner,
            request_id=new_response_id(),
            tools=prompt.tools,
            prompt=prompt,
            sse=query_params(request).get("alt") == "sse",
            trace_id=secrets.token_hex(8),
            cache_rules=rules,
            boundaries=boundaries,
        )

    def quota_rejection(self, request: GenerationRequest, admission: Admission) -> Reply:
        """The Cloud Code 429: `QUOTA_EXHAUSTED` (daily) or `RATE_LIMIT_EXCEEDED`."""
        return code_assist_quota_exceeded(request.model, admission)


class CodeAssistApi(WireApi[CodeAssistDialect]):
    """Routes requests to the Code Assist methods of one simulated upstream."""

    generation_paths = frozenset({GENERATE, STREAM})

    def __init__(
        self, scenario: Scenario, book: QuotaBook, faults: FaultQueue, tally: Tally
    ) -> None:
        dialect = CodeAssistDialect(scenario)
        super().__init__(
            scenario, dialect, GenerationService(scenario, dialect, book, faults, tally)
        )

    def route(self, request: RecordedRequest) -> Reply:
        """countTokens, loadCodeAssist, onboardUser, and the settings and experiments the
        Gemini CLI reads at start, else Google's 404."""
        methods = {
            ("POST", "countTokens"): self._count_tokens,
            ("POST", "loadCodeAssist"): self._load,
            ("POST", "onboardUser"): self._onboard,
            ("POST", "listExperiments"): self._experiments,
            ("GET", "getCodeAssistGlobalUserSetting"): self._setting,
            ("POST", "setCodeAssistGlobalUserSetting"): self._setting,
        }
        name = request.path.removeprefix(PREFIX) if request.path.startswith(PREFIX) else ""
        method = methods.get((request.method, name))
        if method is None:
            return error_reply(404, "Requested entity was not found.")
        refused = self._dialect.authenticate(request)
        if refused is not None:
            return refused
        body = {} if request.method == "GET" else request.body
        if not isinstance(body, dict):
            return invalid_argument(BAD_JSON, violation=True)
        return method(body)

    def _experiments(self, body: dict[str, Any]) -> Reply:
        # No experiments: the CLI then runs on its defaults.
        return json_reply(200, {"experimentIds": [], "flags": []})

    def _setting(self, body: dict[str, Any]) -> Reply:
        optin = body.get("freeTierDataCollectionOptin") is True
        project = self._dialect.settings.project
        return json_reply(
            200, {"cloudaicompanionProject": project, "freeTierDataCollectionOptin": optin}
        )

    def _count_tokens(self, body: dict[str, Any]) -> Reply:
        inner = body.get("request")
        if not isinstance(inner, dict):
            return invalid_argument("* request: request is not specified\n")
        spec = self._dialect.model(inner.get("model"))
        if isinstance(spec, Reply):
            return spec
        prompt = read_request({key: value for key, value in inner.items() if key != "model"})
        if isinstance(prompt, Reply):
            return prompt
        return json_reply(200, {"totalTokens": prompt_tokens(inner)})

    def _load(self, body: dict[str, Any]) -> Reply:
        settings = self._dialect.settings
        allowed = [_tier(settings.tier, default=True)]
        if settings.tier != "free-tier":
            allowed.append(_tier("free-tier", default=False))
        payload = {
            "currentTier": _tier(settings.tier, default=True),
            "allowedTiers": allowed,
            "cloudaicompanionProject": settings.project,
            "gcpManaged": False,
        }
        return json_reply(200, payload)

    def _onboard(self, body: dict[str, Any]) -> Reply:
        settings = self._dialect.settings
        tier = body.get("tierId")
        if tier != settings.tier:
            return invalid_argument(f"Tier {tier!r} is not available to this user.")
        project = {"id": settings.project, "name": settings.project}
        response = {
            "@type": ONBOARD_RESPONSE_TYPE,
            "cloudaicompanionProject": project,
        }
        operation = {"name": f"operations/{secrets.token_hex(8)}", "done": True}
        return json_reply(200, {**operation, "response": response})
