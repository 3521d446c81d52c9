"""The Anthropic Messages API as a simulated upstream serves it.

Routes: `POST /v1/messages` (also `?beta=true`), `POST /v1/messages/count_tokens`,
`GET /v1/models`, `GET /v1/models/{id}`. Wire shapes follow docs/provider-signals.md
A1 (error bodies), A2.2-A2.4 and A2.6 (plan OAuth, and a plan refusing other clients),
B3 (messages and streaming, including `tool_use` blocks streamed as `input_json_delta`) and
B5 (models).
"""

from __future__ import annotations

import math
import secrets
import uuid
from typing import Any

import orjson

from rungway.protocol.anthropic_messages import ERROR_TYPES
from rungway.protocol.sse import encode_event
from rungway.sim.credential import CLAUDE_CODE_ONLY, refuses_client
from rungway.sim.exchange import Header, RecordedRequest, Reply
from rungway.sim.faults import FaultQueue, HttpErrorFault, StreamErrorFault
from rungway.sim.prompt_cache import CacheRules, anthropic_rules
from rungway.sim.quota.windows import Admission, QuotaBook
from rungway.sim.scenario import Scenario, WindowSpec
from rungway.sim.tally import Tally
from rungway.sim.wire.api import WireApi
from rungway.sim.wire.completion import Completion, anthropic_tool_turn, estimate_input_tokens
from rungway.sim.wire.prompt_prefix import anthropic_boundaries
from rungway.sim.wire.serving import GenerationRequest, GenerationService

OAUTH_BETA = "oauth-2025-04-20"
# Models are listed with a fixed creation date: nothing reads it but clients parse it.
MODEL_CREATED_AT = "2025-09-29T00:00:00Z"

ERROR_MESSAGES = {
    400: "Invalid request.",
    401: "invalid x-api-key",
    402: "Your credit balance is too low to access the Anthropic API.",
    403: "Your API key does not have permission to use the specified resource.",
    404: "Not found",
    413: "Request exceeds the maximum allowed number of bytes.",
    429: "Number of request tokens has exceeded your per-minute rate limit.",
    500: "Internal server error",
    529: "Overloaded",
}
SUBSCRIPTION_LIMIT_MESSAGE = (
    "This request would exceed your account's rate limit. Please try again later."
)
_UNIT_WORDS = {
    "requests": "requests",
    "tokens": "tokens",
    "input_tokens": "input tokens",
    "output_tokens": "output tokens",
}
_PERIODS = {60.0: "minute", 3600.0: "hour", 86400.0: "day"}


def new_request_id() -> str:
    """A request id in Anthropic's `req_…` form."""
    return "req_011C" + secrets.token_hex(10)


def error_reply(
    status: int,
    error_type: str,
    message: str,
    request_id: str | None = None,
    headers: tuple[Header, ...] = (),
) -> Reply:
    """An Anthropic error response: `{"type":"error","error":{...},"request_id":...}`."""
    request_id = request_id or new_request_id()
    body = orjson.dumps(
        {
            "type": "error",
            "error": {"type": error_type, "message": message},
            "request_id": request_id,
        }
    )
    return Reply(status, body, ((b"request-id", request_id.encode()), *headers))


def _org_limit_message(window: WindowSpec, organization_id: str) -> str:
    period = _PERIODS.get(window.length_s, f"{window.length_s:g} seconds")
    return (
        f"This request would exceed the rate limit for your organization ({organization_id}) "
        f"of {window.capacity:,} {_UNIT_WORDS[window.unit]} per {period}. For details, refer "
        "to: https://docs.anthropic.com/en/api/rate-limits. You can see the response headers "
        "for current usage. Please reduce the prompt length or the maximum tokens requested, "
        "or try again later. You may also contact sales at "
        "https://www.anthropic.com/contact-sales to discuss your options for a rate limit "
        "increase."
    )


def _usage(completion: Completion, output_tokens: int) -> dict[str, Any]:
    # `input_tokens` leaves out what was read from or written to the prompt cache (B3).
    return {
        "input_tokens": completion.uncached_input_tokens,
        "cache_creation_input_tokens": completion.cache_write_tokens,
        "cache_read_input_tokens": completion.cache_read_tokens,
        "cache_creation": {
            "ephemeral_5m_input_tokens": completion.cache_write_5m_tokens,
            "ephemeral_1h_input_tokens": completion.cache_write_1h_tokens,
        },
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def _prompt(body: dict[str, Any]) -> dict[str, Any]:
    return {key: body[key] for key in ("system", "messages", "tools") if key in body}


def _cacheable(request: RecordedRequest, input_tokens: int, rules: CacheRules) -> bool:
    """Whether the prompt could write or read a cache: long enough, with a breakpoint.
    A body that never says `cache_control` is not walked at all, which keeps the sim fast."""
    return input_tokens >= rules.min_tokens and b'"cache_control"' in request.raw_body


def _stop_reason(completion: Completion) -> str:
    if completion.tool_call is not None:
        return "tool_use"
    return "max_tokens" if completion.truncated else "end_turn"


def _block(completion: Completion) -> dict[str, Any]:
    """The reply's one content block: its text, or its tool call (B3)."""
    call = completion.tool_call
    if call is None:
        return {"type": "text", "text": completion.text}
    tool_id = "toolu_01" + secrets.token_hex(11)
    return {"type": "tool_use", "id": tool_id, "name": call.name, "input": call.input}


class AnthropicDialect:
    """Parses Messages requests and renders Anthropic replies, errors and stream frames."""

    def __init__(self, scenario: Scenario) -> None:
        self._scenario = scenario
        self._models = {model.id: model for model in scenario.models}
        self.organization_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"rungway-sim:{scenario.name}"))
        self._plan = scenario.quota_headers == "anthropic-unified"

    def authenticate(self, request: RecordedRequest) -> Reply | None:
        """None when the credential is accepted, else the real API's 401."""
        auth = self._scenario.auth
        if auth.kind == "none":
            return None
        api_key = request.header("x-api-key")
        authorization = request.header("authorization")
        bearer = None
        if authorization is not None and authorization[:7].lower() == "bearer ":
            bearer = authorization[7:].strip()
        if auth.kind == "x-api-key":
            if api_key is None:
                return error_reply(401, "authentication_error", "x-api-key header is required")
            if api_key != auth.token:
                return error_reply(401, "authentication_error", "invalid x-api-key")
            return None
        if bearer is None:
            if api_key is not None:
                return error_reply(401, "authentication_error", "invalid x-api-key")
            return error_reply(401, "authentication_error", "x-api-key header is required")
        betas = {beta.strip() for beta in (request.header("anthropic-beta") or "").split(",")}
        if OAUTH_BETA not in betas:
            # A plan token without the OAuth beta is refused outright (A2.2).
            message = "OAuth authentication is currently not supported."
            return error_reply(401, "authentication_error", message)
        if bearer != auth.token:
            return error_reply(401, "authentication_error", "Invalid bearer token")
        return None

    def check_common(self, request: RecordedRequest) -> Reply | dict[str, Any]:
        """Auth, the client a plan token serves, the version header and a JSON object body
        with a served model."""
        refused = self.authenticate(request)
        if refused is not None:
            return refused
        if refuses_client(self._scenario.auth, request):
            return error_reply(400, "invalid_request_error", CLAUDE_CODE_ONLY)
        if request.header("anthropic-version") is None:
            return error_reply(
                400, "invalid_request_error", "anthropic-version: header is required"
            )
        body = request.body
        if not isinstance(body, dict):
            return error_reply(400, "invalid_request_error", "The request body is not valid JSON.")
        for required in ("model", "messages"):
            if required not in body:
                return error_reply(400, "invalid_request_error", f"{required}: Field required")
        if body["model"] not in self._models:
            return error_reply(404, "not_found_error", f"model: {body['model']}")
        return body

    def parse_generation(self, request: RecordedRequest) -> GenerationRequest | Reply:
        """Validate a `POST /v1/messages` request."""
        body = self.check_common(request)
        if isinstance(body, Reply):
            return body
        max_tokens = body.get("max_tokens")
        if max_tokens is None:
            return error_reply(400, "invalid_request_error", "max_tokens: Field required")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            message = "max_tokens: Input should be greater than or equal to 1"
            return error_reply(400, "invalid_request_error", message)
        model = self._models[body["model"]]
        if model.max_output_tokens is not None and max_tokens > model.max_output_tokens:
            message = (
                f"max_tokens: {max_tokens} > {model.max_output_tokens}, which is the maximum "
                f"allowed number of output tokens for {model.id}"
            )
            return error_reply(400, "invalid_request_error", message)
        input_tokens = estimate_input_tokens(_prompt(body))
        if model.context_window is not None and input_tokens > model.context_window:
            message = f"prompt is too long: {input_tokens} tokens > {model.context_window} maximum"
            return error_reply(400, "invalid_request_error", message)
        rules = anthropic_rules(model.id, plan=self._plan)
        cacheable = _cacheable(request, input_tokens, rules)
        return GenerationRequest(
            model=model.id,
            stream=body.get("stream") is True,
            max_tokens=max_tokens,
            input_tokens=input_tokens,
            body=body,
            request_id=new_request_id(),
            tools=anthropic_tool_turn(body),
            cache_rules=rules,
            boundaries=anthropic_boundaries(body) if cacheable else (),
        )

    def http_error(self, fault: HttpErrorFault, request_id: str) -> Reply:
        """An injected error in Anthropic's shape (529 is `overloaded_error`)."""
        status = fault.status
        default_type = "api_error" if status >= 500 else "invalid_request_error"
        error_type = fault.error_type or ERROR_TYPES.get(status, default_type)
        message = fault.message or ERROR_MESSAGES.get(status, error_type)
        headers: tuple[Header, ...] = ()
        if fault.retry_after_s is not None:
            headers = ((b"retry-after", str(math.ceil(fault.retry_after_s)).encode()),)
        return error_reply(status, error_type, message, request_id, headers)

    def quota_rejection(self, request: GenerationRequest, admission: Admission) -> Reply:
        """The 429 `rate_limit_error` of an exhausted window, with `retry-after`."""
        if self._scenario.quota_headers == "anthropic-unified" or not admission.rejected:
            message = SUBSCRIPTION_LIMIT_MESSAGE
        else:
            binding = max(admission.rejected, key=lambda reading: reading.reset_at)
            message = _org_limit_message(binding.spec, self.organization_id)
        retry_after = (b"retry-after", str(admission.retry_after_s()).encode())
        return error_reply(429, "rate_limit_error", message, request.request_id, (retry_after,))

    def _head(self, request_id: str) -> list[Header]:
        return [
            (b"request-id", request_id.encode()),
            (b"anthropic-organization-id", self.organization_id.encode()),
        ]

    def message(self, request: GenerationRequest, completion: Completion) -> Reply:
        """A complete `message` object."""
        body = {
            "id": "msg_01" + secrets.token_hex(11),
            "type": "message",
            "role": "assistant",
            "model": request.model,
            "content": [_block(completion)],
            "stop_reason": _stop_reason(completion),
            "stop_sequence": None,
            "usage": _usage(completion, completion.output_tokens),
        }
        return Reply(200, orjson.dumps(body), tuple(self._head(request.request_id)))

    def stream_head(self, request: GenerationRequest) -> list[Header]:
        """Diagnostic headers of a stream."""
        return self._head(request.request_id)

    def stream_frames(self, request: GenerationRequest, completion: Completion) -> list[bytes]:
        """message_start, content_block_start, ping, deltas, stops, message_delta, stop.

        A tool call's block opens with empty `input`, then its JSON arrives as
        `input_json_delta` fragments, the first one empty as the real API sends it.
        """
        start_message: dict[str, Any] = {
            "id": "msg_01" + secrets.token_hex(11),
            "type": "message",
            "role": "assistant",
            "model": request.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            # The real API reports a placeholder output count here; the final count
            # arrives in message_delta.
            "usage": _usage(completion, 1),
        }
        block = _block(completion)
        chunk_tokens = self._scenario.response.chunk_tokens
        if completion.tool_call is None:
            block["text"] = ""
            deltas = [
                {"type": "text_delta", "text": text} for text in completion.chunks(chunk_tokens)
            ]
        else:
            block["input"] = {}
            parts = ["", *completion.tool_call.fragments(chunk_tokens)]
            deltas = [{"type": "input_json_delta", "partial_json": part} for part in parts]
        frames = [
            encode_event({"type": "message_start", "message": start_message}, "message_start"),
            encode_event(
                {"type": "content_block_start", "index": 0, "content_block": block},
                "content_block_start",
            ),
            encode_event({"type": "ping"}, "ping"),
        ]
        for delta in deltas:
            event = {"type": "content_block_delta", "index": 0, "delta": delta}
            frames.append(encode_event(event, "content_block_delta"))
        frames.append(
            encode_event({"type": "content_block_stop", "index": 0}, "content_block_stop")
        )
        usage = _usage(completion, completion.output_tokens)
        del usage["cache_creation"], usage["service_tier"]
        message_delta = {
            "type": "message_delta",
            "delta": {"stop_reason": _stop_reason(completion), "stop_sequence": None},
            "usage": usage,
        }
        frames.append(encode_event(message_delta, "message_delta"))
        frames.append(encode_event({"type": "message_stop"}, "message_stop"))
        return frames

    def stream_error_frame(
        self, request: GenerationRequest, fault: StreamErrorFault, sent: int
    ) -> bytes:
        """`event: error` carrying an `overloaded_error` (or the fault's type)."""
        error = {
            "type": fault.error_type or "overloaded_error",
            "message": fault.message or "Overloaded",
        }
        return encode_event({"type": "error", "error": error}, "error")

    def keepalive_frame(self) -> bytes:
        """Anthropic's `ping` event."""
        return encode_event({"type": "ping"}, "ping")


class AnthropicApi(WireApi[AnthropicDialect]):
    """Routes requests to the Anthropic endpoints of one simulated upstream."""

    generation_paths = frozenset({"/v1/messages"})

    def __init__(
        self, scenario: Scenario, book: QuotaBook, faults: FaultQueue, tally: Tally
    ) -> None:
        dialect = AnthropicDialect(scenario)
        super().__init__(
            scenario, dialect, GenerationService(scenario, dialect, book, faults, tally)
        )

    def route(self, request: RecordedRequest) -> Reply:
        """Token counting, the model list and one model, else the Messages API's 404."""
        path, method = request.path, request.method
        if method == "POST" and path == "/v1/messages/count_tokens":
            return self._count_tokens(request)
        if method == "GET" and path == "/v1/models":
            return self._list_models(request)
        if method == "GET" and path.startswith("/v1/models/"):
            return self._get_model(request, path.removeprefix("/v1/models/"))
        return error_reply(404, "not_found_error", "Not Found")

    def _count_tokens(self, request: RecordedRequest) -> Reply:
        body = self._dialect.check_common(request)
        if isinstance(body, Reply):
            return body
        payload = orjson.dumps({"input_tokens": estimate_input_tokens(_prompt(body))})
        return Reply(200, payload, ((b"request-id", new_request_id().encode()),))

    def _authorized(self, request: RecordedRequest) -> Reply | None:
        refused = self._dialect.authenticate(request)
        if refused is None and request.header("anthropic-version") is None:
            return error_reply(
                400, "invalid_request_error", "anthropic-version: header is required"
            )
        return refused

    def _model_object(self, model_id: str) -> dict[str, Any]:
        model = self._scenario.model(model_id)
        assert model is not None
        return {
            "type": "model",
            "id": model.id,
            "display_name": model.display_name or model.id,
            "created_at": MODEL_CREATED_AT,
        }

    def _list_models(self, request: RecordedRequest) -> Reply:
        refused = self._authorized(request)
        if refused is not None:
            return refused
        query = dict(part.partition("=")[::2] for part in request.query.split("&") if part)
        ids = [model.id for model in self._scenario.models]
        if query.get("after_id") in ids:
            ids = ids[ids.index(query["after_id"]) + 1 :]
        if query.get("before_id") in ids:
            ids = ids[: ids.index(query["before_id"])]
        limit = int(query["limit"]) if query.get("limit", "").isdigit() else 20
        page = ids[: max(1, min(limit, 1000))]
        body = {
            "data": [self._model_object(model_id) for model_id in page],
            "has_more": len(ids) > len(page),
            "first_id": page[0] if page else None,
            "last_id": page[-1] if page else None,
        }
        return Reply(200, orjson.dumps(body), ((b"request-id", new_request_id().encode()),))

    def _get_model(self, request: RecordedRequest, model_id: str) -> Reply:
        refused = self._authorized(request)
        if refused is not None:
            return refused
        if self._scenario.model(model_id) is None:
            return error_reply(404, "not_found_error", f"model: {model_id}")
        body = orjson.dumps(self._model_object(model_id))
        return Reply(200, body, ((b"request-id", new_request_id().encode()),))
