"""The Gemini API (generativelanguage.googleapis.com) as a simulated upstream serves it.

Routes, under `/v1beta` and `/v1` alike: `POST /models/{model}:generateContent`,
`:streamGenerateContent` (`?alt=sse` gives SSE events ending in "\\r\\n\\r\\n"; without it
the stream is one JSON array sent element by element, as the real API does),
`:countTokens`, `GET /models` and `GET /models/{model}`. The API key comes in
`x-goog-api-key` or `?key=`; a wrong one is Google's 400 `API_KEY_INVALID`. A spent
free-tier window is a 429 `RESOURCE_EXHAUSTED` with `QuotaFailure` and `RetryInfo`
(docs/provider-signals.md A6.2), and no response carries quota headers.

`GoogleDialect` holds what the Gemini API and Gemini Code Assist share: replies,
stream framing and error bodies. Code Assist (code_assist.py) wraps each reply in its
envelope.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qs

import orjson

from rungway.protocol.asgi import Receive, Scope, Send
from rungway.sim.exchange import Header, RecordedRequest, Reply, json_reply, send_reply
from rungway.sim.faults import FaultQueue, HttpErrorFault, StreamErrorFault
from rungway.sim.prompt_cache import Boundary, CacheRules, gemini_rules
from rungway.sim.quota.google_errors import (
    STATUS_NAMES,
    api_key_invalid,
    error_body,
    error_reply,
    gemini_quota_exceeded,
    invalid_argument,
    retry_info,
    unregistered_caller,
)
from rungway.sim.quota.windows import Admission, QuotaBook
from rungway.sim.scenario import ModelSpec, Scenario
from rungway.sim.tally import Tally
from rungway.sim.wire.api import WireApi
from rungway.sim.wire.completion import Completion
from rungway.sim.wire.gemini_content import (
    Prompt,
    prompt_tokens,
    read_request,
    stream_chunks,
    whole_reply,
)
from rungway.sim.wire.prompt_prefix import gemini_boundaries
from rungway.sim.wire.serving import GenerationRequest, GenerationService

_VERSIONS = r"/(v1beta|v1)/models"
GENERATION = re.compile(_VERSIONS + r"/([^/:]+):(generateContent|streamGenerateContent)$")
COUNT_TOKENS = re.compile(_VERSIONS + r"/([^/:]+):countTokens$")
MODEL = re.compile(_VERSIONS + r"(?:/([^/:]+))?$")
_CODES = {name: code for code, name in STATUS_NAMES.items()}
BAD_JSON = "Invalid JSON payload received. Unexpected token."
# What the model listing reports for every model: the 2.5 family's published defaults.
_SAMPLING = {"temperature": 1, "topP": 0.95, "topK": 64, "maxTemperature": 2, "thinking": True}
_METHODS = ["generateContent", "countTokens", "createCachedContent", "batchGenerateContent"]
_DEFAULT_INPUT_LIMIT = 1_048_576
_DEFAULT_OUTPUT_LIMIT = 65_536


@dataclass(frozen=True, slots=True)
class GoogleRequest(GenerationRequest):
    """A generation request to a Google API: its prompt, whether the stream is SSE, and
    (for Code Assist) the trace id its replies carry."""

    prompt: Prompt | None = None
    sse: bool = True
    trace_id: str | None = None


def query_params(request: RecordedRequest) -> dict[str, str]:
    """The query string's parameters (the first value of each)."""
    return {name: values[0] for name, values in parse_qs(request.query).items()}


def new_response_id() -> str:
    """A `responseId` in the real API's form (23 URL-safe characters)."""
    return secrets.token_urlsafe(18)[:23]


def sse_frame(payload: object) -> bytes:
    """One SSE event as Google frames it: a `data:` line and "\\r\\n\\r\\n"."""
    return b"data: " + orjson.dumps(payload) + b"\r\n\r\n"


def max_tokens_refusal(model: ModelSpec, prompt: Prompt) -> Reply | None:
    """The 400 for an output cap or a prompt beyond the model's limits, else None."""
    if model.max_output_tokens is not None and (prompt.max_tokens or 0) > model.max_output_tokens:
        return invalid_argument(
            f"Unable to submit request because it has a maxOutputTokens value of "
            f"{prompt.max_tokens} but the supported range is from 1 (inclusive) to "
            f"{model.max_output_tokens + 1} (exclusive). Update the value and try again."
        )
    if model.context_window is not None and prompt.input_tokens > model.context_window:
        return invalid_argument(
            f"The input token count ({prompt.input_tokens}) exceeds the maximum number of "
            f"tokens allowed ({model.context_window})."
        )
    return None


def implicit_cache(
    model_id: str, prompt: Prompt, body: Mapping[str, Any]
) -> tuple[CacheRules, tuple[Boundary, ...]]:
    """The implicit cache's rules for `model_id`, and the prompt's boundaries when it is
    long enough; a request on explicit cached content reads that instead."""
    rules = gemini_rules(model_id)
    if prompt.cached_tokens or prompt.input_tokens < rules.min_tokens:
        return rules, ()
    return rules, gemini_boundaries(body)


def _with_cache_reads(prompt: Prompt, completion: Completion) -> Prompt:
    """The prompt as its usage reports it: implicit cache reads count as cached content."""
    if not completion.cache_read_tokens:
        return prompt
    return replace(prompt, cached_tokens=prompt.cached_tokens + completion.cache_read_tokens)


def _google(request: GenerationRequest) -> GoogleRequest:
    assert isinstance(request, GoogleRequest)
    return request


class GoogleDialect:
    """Replies, stream frames and errors shared by the Gemini API and Code Assist."""

    def __init__(self, scenario: Scenario) -> None:
        self._scenario = scenario
        self._models = {model.id: model for model in scenario.models}

    def wrap(self, request: GoogleRequest, payload: dict[str, Any]) -> dict[str, Any]:
        """A response object as sent (Code Assist puts it in an envelope)."""
        return payload

    def http_error(self, fault: HttpErrorFault, request_id: str) -> Reply:
        """An injected error in Google's shape; a `retry_after_s` becomes `RetryInfo`."""
        details = [] if fault.retry_after_s is None else [retry_info(fault.retry_after_s)]
        return error_reply(fault.status, fault.message, fault.error_type, details)

    def message(self, request: GenerationRequest, completion: Completion) -> Reply:
        """A complete GenerateContentResponse."""
        google = _google(request)
        assert google.prompt is not None
        prompt = _with_cache_reads(google.prompt, completion)
        payload = whole_reply(prompt, completion, google.model, google.request_id)
        return json_reply(200, self.wrap(google, payload))

    def stream_head(self, request: GenerationRequest) -> list[Header]:
        """A JSON-array stream says so in its content type; SSE keeps the default."""
        if _google(request).sse:
            return []
        return [(b"content-type", b"application/json; charset=UTF-8")]

    def stream_frames(self, request: GenerationRequest, completion: Completion) -> list[bytes]:
        """SSE events, or the pieces of one JSON array (whose last piece closes it)."""
        google = _google(request)
        assert google.prompt is not None
        chunk_tokens = self._scenario.response.chunk_tokens
        prompt = _with_cache_reads(google.prompt, completion)
        chunks = stream_chunks(prompt, completion, chunk_tokens, google.model, google.request_id)
        payloads = [self.wrap(google, chunk) for chunk in chunks]
        if google.sse:
            return [sse_frame(payload) for payload in payloads]
        bodies = [orjson.dumps(payload) for payload in payloads]
        return [b"[" + bodies[0], *(b",\r\n" + body for body in bodies[1:]), b"]"]

    def stream_error_frame(
        self, request: GenerationRequest, fault: StreamErrorFault, sent: int
    ) -> bytes:
        """The error object as the stream's next element (503 `UNAVAILABLE` by default)."""
        status = fault.error_type or "UNAVAILABLE"
        code = _CODES.get(status, 500)
        body = error_body(code, fault.message, status)
        if _google(request).sse:
            return sse_frame(body)
        return (b",\r\n" if sent else b"[") + orjson.dumps(body) + b"]"

    def keepalive_frame(self) -> bytes:
        """Blank space, which neither an SSE nor a JSON-array reader takes for data."""
        return b"\r\n"


class GeminiDialect(GoogleDialect):
    """Parses Gemini API requests and answers its free-tier exhaustion."""

    def authenticate(self, request: RecordedRequest) -> Reply | None:
        """None when the key is accepted; 403 without one, 400 `API_KEY_INVALID` if wrong."""
        auth = self._scenario.auth
        if auth.kind == "none":
            return None
        key = request.header("x-goog-api-key") or query_params(request).get("key")
        if not key:
            return unregistered_caller()
        return None if key == auth.token else api_key_invalid()

    def model(self, version: str, model_id: str, method: str) -> ModelSpec | Reply:
        """A served model, or the API's 404 for the method."""
        spec = self._models.get(model_id.removeprefix("models/"))
        if spec is not None:
            return spec
        return error_reply(
            404,
            f"models/{model_id} is not found for API version {version}, or is not supported "
            f"for {method}. Call ListModels to see the list of available models and their "
            "supported methods.",
        )

    def parse_generation(self, request: RecordedRequest) -> GenerationRequest | Reply:
        """Validate a generateContent or streamGenerateContent request."""
        match = GENERATION.match(request.path)
        assert match is not None
        refused = self.authenticate(request)
        if refused is not None:
            return refused
        spec = self.model(match[1], match[2], match[3])
        if isinstance(spec, Reply):
            return spec
        if request.body is None:
            return invalid_argument(BAD_JSON, violation=True)
        prompt = read_request(request.body, thinking=self._scenario.response.thought_tokens)
        if isinstance(prompt, Reply):
            return prompt
        refusal = max_tokens_refusal(spec, prompt)
        if refusal is not None:
            return refusal
        rules, boundaries = implicit_cache(spec.id, prompt, request.body)
        return GoogleRequest(
            model=spec.id,
            stream=match[3] == "streamGenerateContent",
            max_tokens=prompt.max_tokens,
            input_tokens=prompt.input_tokens,
            body=request.body,
            request_id=new_response_id(),
            tools=prompt.tools,
            prompt=prompt,
            sse=query_params(request).get("alt") == "sse",
            cache_rules=rules,
            boundaries=boundaries,
        )

    def quota_rejection(self, request: GenerationRequest, admission: Admission) -> Reply:
        """The free tier's 429 with `Help`, `QuotaFailure` and `RetryInfo`."""
        return gemini_quota_exceeded(request.model, admission)


class GeminiApi(WireApi[GeminiDialect]):
    """Routes requests to the Gemini API endpoints of one simulated upstream."""

    def __init__(
        self, scenario: Scenario, book: QuotaBook, faults: FaultQueue, tally: Tally
    ) -> None:
        dialect = GeminiDialect(scenario)
        super().__init__(
            scenario, dialect, GenerationService(scenario, dialect, book, faults, tally)
        )

    async def handle(
        self, scope: Scope, receive: Receive, send: Send, request: RecordedRequest
    ) -> None:
        """Generation requests go through the service; the model is in the path."""
        if request.method == "POST" and GENERATION.match(request.path):
            await self._service.serve(scope, receive, send, request)
        else:
            await send_reply(send, self.route(request))

    def route(self, request: RecordedRequest) -> Reply:
        """Token counting, the model list and one model, else Google's 404."""
        counting = COUNT_TOKENS.match(request.path)
        if request.method == "POST" and counting is not None:
            return self._count_tokens(request, counting[1], counting[2])
        listing = MODEL.match(request.path)
        if request.method == "GET" and listing is not None:
            refused = self._dialect.authenticate(request)
            if refused is not None:
                return refused
            if listing[2] is None:
                return self._list_models(request)
            spec = self._dialect.model(listing[1], listing[2], "get")
            return spec if isinstance(spec, Reply) else json_reply(200, model_object(spec))
        return error_reply(404, "Requested entity was not found.")

    def _count_tokens(self, request: RecordedRequest, version: str, model_id: str) -> Reply:
        refused = self._dialect.authenticate(request)
        if refused is not None:
            return refused
        spec = self._dialect.model(version, model_id, "countTokens")
        if isinstance(spec, Reply):
            return spec
        body = request.body
        if not isinstance(body, dict):
            return invalid_argument(BAD_JSON, violation=True)
        for name in body:
            if name not in ("contents", "generateContentRequest", "generate_content_request"):
                message = (
                    f'Invalid JSON payload received. Unknown name "{name}": Cannot find field.'
                )
                return invalid_argument(message, violation=True)
        inner = body.get("generateContentRequest") or body.get("generate_content_request")
        target = inner if isinstance(inner, dict) else body
        prompt = read_request({key: value for key, value in target.items() if key != "model"})
        if isinstance(prompt, Reply):
            return prompt
        total = prompt_tokens(target)
        details = [{"modality": "TEXT", "tokenCount": total}]
        return json_reply(200, {"totalTokens": total, "promptTokensDetails": details})

    def _list_models(self, request: RecordedRequest) -> Reply:
        params = query_params(request)
        size = int(params["pageSize"]) if params.get("pageSize", "").isdigit() else 50
        start = int(params["pageToken"]) if params.get("pageToken", "").isdigit() else 0
        models = self._scenario.models
        page = models[start : start + max(1, min(size, 1000))]
        body: dict[str, Any] = {"models": [model_object(model) for model in page]}
        if start + len(page) < len(models):
            body["nextPageToken"] = str(start + len(page))
        return json_reply(200, body)


def model_object(model: ModelSpec) -> dict[str, Any]:
    """A `Model` resource as the listing reports it."""
    name = model.display_name or model.id.replace("-", " ").title()
    return {
        "name": f"models/{model.id}",
        "version": "001",
        "displayName": name,
        "description": f"{name}, served by a simulated upstream.",
        "inputTokenLimit": model.context_window or _DEFAULT_INPUT_LIMIT,
        "outputTokenLimit": model.max_output_tokens or _DEFAULT_OUTPUT_LIMIT,
        "supportedGenerationMethods": _METHODS,
        **_SAMPLING,
    }
