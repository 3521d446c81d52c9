"""The OpenAI Chat Completions API as a simulated upstream serves it.

Routes: `POST /v1/chat/completions`, `GET /v1/models`, `GET /v1/models/{id}`. Wire
shapes follow docs/provider-signals.md A3 (errors, 429 flavours), B1 (completions and
streaming, including the `include_usage` trailing chunk) and B5 (models).

The same API stands in for the providers that speak it: a Codex-family scenario answers
an exhausted plan with `usage_limit_reached` (A4.5), a Copilot seat refuses premium
requests past its allowance with 402 (A5.3), and OpenRouter reports `usage.cost` in
every reply and always sends the stream's usage chunk (A7). A tool call is rendered as
`tool_calls` with finish reason `tool_calls`, streamed as argument fragments (B1).
"""

from __future__ import annotations

import secrets
from typing import Any

import orjson

from rungway.clock import Clock
from rungway.protocol.sse import DONE, encode_event
from rungway.sim.exchange import Header, RecordedRequest, Reply
from rungway.sim.faults import FaultQueue, HttpErrorFault, StreamErrorFault
from rungway.sim.prompt_cache import openai_rules
from rungway.sim.quota.codex import usage_limit_reply
from rungway.sim.quota.credits import cost_of
from rungway.sim.quota.windows import Admission, QuotaBook
from rungway.sim.scenario import Scenario
from rungway.sim.tally import Tally
from rungway.sim.wire.api import WireApi
from rungway.sim.wire.completion import Completion, ToolCall, chat_tool_turn, estimate_input_tokens
from rungway.sim.wire.openai_errors import (
    BAD_JSON_MESSAGE,
    ERROR_DEFAULTS,
    INSUFFICIENT_QUOTA_MESSAGE,
    error_reply,
    new_request_id,
    openai_authenticate,
    quota_exceeded,
    wait_phrase,
)
from rungway.sim.wire.prompt_prefix import chat_boundaries
from rungway.sim.wire.serving import Billing, GenerationRequest, GenerationService

# Models are listed with a fixed creation time: nothing reads it but clients parse it.
MODEL_CREATED = 1_735_689_600
ORGANIZATION = "org-rungway-sim"
_PERIODS = {60.0: ("min", "M"), 3600.0: ("hour", "H"), 86400.0: ("day", "D")}


def _prompt(body: dict[str, Any]) -> dict[str, Any]:
    return {key: body[key] for key in ("messages", "tools") if key in body}


def new_call_id() -> str:
    """A tool-call id in OpenAI's `call_…` form."""
    return "call_" + secrets.token_urlsafe(18).replace("-", "a").replace("_", "b")


def finish_reason(completion: Completion) -> str:
    """Why the reply ended: a tool call, the output cap, or a natural stop."""
    if completion.tool_call is not None:
        return "tool_calls"
    return "length" if completion.truncated else "stop"


def _call_object(call: ToolCall, call_id: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


class OpenAIDialect:
    """Parses chat-completion requests and renders OpenAI replies, errors and chunks."""

    def __init__(self, scenario: Scenario, clock: Clock) -> None:
        self._scenario = scenario
        self._clock = clock
        self._models = {model.id: model for model in scenario.models}
        self._authenticate = openai_authenticate(scenario.auth)
        self._codex = scenario.codex_settings
        premium = scenario.premium_window()
        self._premium = None if premium is None else premium.name
        # OpenRouter prices every reply and always streams usage (A7).
        self._priced = scenario.usage_endpoint == "openrouter"

    def authenticate(self, request: RecordedRequest) -> Reply | None:
        """None when the credential is accepted, else the real API's 401."""
        return self._authenticate(request)

    def parse_generation(self, request: RecordedRequest) -> GenerationRequest | Reply:
        """Validate a `POST /v1/chat/completions` request."""
        refused = self.authenticate(request)
        if refused is not None:
            return refused
        body = request.body
        if not isinstance(body, dict):
            return error_reply(400, BAD_JSON_MESSAGE)
        if "model" not in body:
            return error_reply(400, "you must provide a model parameter")
        if "messages" not in body:
            message = "Missing required parameter: 'messages'."
            return error_reply(400, message, code="missing_required_parameter", param="messages")
        model = self._models.get(body["model"])
        if model is None:
            message = f"The model `{body['model']}` does not exist or you do not have access to it."
            return error_reply(404, message, code="model_not_found")
        param = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
        max_tokens = body.get(param)
        if max_tokens is not None:
            if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
                message = (
                    f"Invalid '{param}': integer below minimum value. Expected a value >= 1, "
                    f"but got {max_tokens!r} instead."
                )
                return error_reply(400, message, code="integer_below_min_value", param=param)
            if model.max_output_tokens is not None and max_tokens > model.max_output_tokens:
                message = (
                    f"max_tokens is too large: {max_tokens}. This model supports at most "
                    f"{model.max_output_tokens} completion tokens, whereas you provided "
                    f"{max_tokens}."
                )
                return error_reply(400, message, code="invalid_value", param=param)
        input_tokens = estimate_input_tokens(_prompt(body))
        if model.context_window is not None and input_tokens > model.context_window:
            message = (
                f"This model's maximum context length is {model.context_window} tokens. "
                f"However, your messages resulted in {input_tokens} tokens. Please reduce the "
                "length of the messages."
            )
            return error_reply(400, message, code="context_length_exceeded", param="messages")
        rules = openai_rules(body.get("prompt_cache_retention"))
        return GenerationRequest(
            model=model.id,
            stream=body.get("stream") is True,
            max_tokens=max_tokens,
            input_tokens=input_tokens,
            body=body,
            request_id=new_request_id(),
            tools=chat_tool_turn(body),
            cache_rules=rules,
            boundaries=chat_boundaries(body) if input_tokens >= rules.min_tokens else (),
        )

    def http_error(self, fault: HttpErrorFault, request_id: str) -> Reply:
        """An injected error in OpenAI's shape; 529 becomes 503 (OpenAI has no 529)."""
        status = 503 if fault.status == 529 else fault.status
        default_type = "server_error" if status >= 500 else "invalid_request_error"
        error_type, code, message = ERROR_DEFAULTS.get(status, (default_type, None, "Error."))
        if fault.error_type == "insufficient_quota":
            code, message = "insufficient_quota", INSUFFICIENT_QUOTA_MESSAGE
        headers: tuple[Header, ...] = ()
        if fault.retry_after_s is not None:
            headers = ((b"retry-after", f"{fault.retry_after_s:g}".encode()),)
        return error_reply(
            status,
            fault.message or message,
            error_type=fault.error_type or error_type,
            code=fault.code or code,
            request_id=request_id,
            headers=headers,
        )

    def quota_rejection(self, request: GenerationRequest, admission: Admission) -> Reply:
        """The refusal of a request an exhausted window stops.

        A ChatGPT plan's `usage_limit_reached`, a Copilot seat's 402, or otherwise the
        transient 429 `rate_limit_exceeded`.
        """
        if self._codex is not None:
            return usage_limit_reply(admission, self._codex)
        if any(reading.spec.name == self._premium for reading in admission.rejected):
            return quota_exceeded()
        wait = wait_phrase(max(0.0, admission.retry_after_s()))
        if not admission.rejected:
            message = f"Rate limit reached for {request.model}. Please try again in {wait}."
            return error_reply(429, message, error_type="requests", code="rate_limit_exceeded")
        binding = max(admission.rejected, key=lambda reading: reading.reset_at)
        window = binding.spec
        kind = "requests" if window.unit == "requests" else "tokens"
        wait = wait_phrase(max(0.001, binding.reset_at - admission.now))
        period, letter = _PERIODS.get(window.length_s, (f"{window.length_s:g}s", ""))
        label = f"{kind} per {period}" + (f" ({kind[0].upper()}P{letter})" if letter else "")
        requested = 1 if kind == "requests" else request.input_tokens + (request.max_tokens or 0)
        message = (
            f"Rate limit reached for {request.model} in organization {ORGANIZATION} on {label}: "
            f"Limit {window.capacity}, Used {binding.used}, Requested {requested}. Please try "
            f"again in {wait}. Visit https://platform.openai.com/account/rate-limits to learn "
            "more."
        )
        return error_reply(
            429,
            message,
            error_type=kind,
            code="rate_limit_exceeded",
            request_id=request.request_id,
        )

    def _usage(self, request: GenerationRequest, completion: Completion) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "prompt_tokens": completion.input_tokens,
            "completion_tokens": completion.output_tokens,
            "total_tokens": completion.input_tokens + completion.output_tokens,
            # `prompt_tokens` includes the tokens read from the prompt cache (B4).
            "prompt_tokens_details": {
                "cached_tokens": completion.cache_read_tokens,
                "audio_tokens": 0,
            },
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }
        if self._priced:
            model = self._models[request.model]
            cost = cost_of(model, completion.input_tokens, completion.output_tokens)
            usage["cost"] = cost.total
            usage["is_byok"] = False
            usage["cost_details"] = {
                "upstream_inference_cost": None,
                "upstream_inference_prompt_cost": cost.prompt,
                "upstream_inference_completions_cost": cost.completion,
            }
        return usage

    def message(self, request: GenerationRequest, completion: Completion) -> Reply:
        """A complete `chat.completion` object."""
        message: dict[str, Any] = {
            "role": "assistant",
            "content": completion.text,
            "refusal": None,
            "annotations": [],
        }
        if completion.tool_call is not None:
            message["content"] = None
            message["tool_calls"] = [_call_object(completion.tool_call, new_call_id())]
        body = {
            "id": "chatcmpl-" + secrets.token_hex(14),
            "object": "chat.completion",
            "created": int(self._clock.now()),
            "model": request.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish_reason(completion),
                }
            ],
            "usage": self._usage(request, completion),
            "service_tier": "default",
            "system_fingerprint": "fp_rungwaysim",
        }
        return Reply(200, orjson.dumps(body), self._head(request))

    def _head(self, request: GenerationRequest) -> tuple[Header, ...]:
        return (
            (b"x-request-id", request.request_id.encode()),
            (b"openai-organization", ORGANIZATION.encode()),
        )

    def stream_head(self, request: GenerationRequest) -> list[Header]:
        """Diagnostic headers of a stream."""
        return list(self._head(request))

    def stream_frames(self, request: GenerationRequest, completion: Completion) -> list[bytes]:
        """Role chunk, text chunks, finish chunk, [usage chunk], `[DONE]`."""
        options = request.body.get("stream_options")
        asked = isinstance(options, dict) and options.get("include_usage") is True
        include_usage = asked or self._priced
        chunk_id = "chatcmpl-" + secrets.token_hex(14)
        created = int(self._clock.now())

        def chunk(delta: dict[str, Any], finish_reason: str | None) -> bytes:
            data: dict[str, Any] = {
                "id": chunk_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": request.model,
                "service_tier": "default",
                "system_fingerprint": "fp_rungwaysim",
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
                ],
            }
            if include_usage:
                data["usage"] = None
            return encode_event(data)

        chunk_tokens = self._scenario.response.chunk_tokens
        call = completion.tool_call
        if call is None:
            frames = [chunk({"role": "assistant", "content": ""}, None)]
            frames.extend(
                chunk({"content": text}, None) for text in completion.chunks(chunk_tokens)
            )
        else:
            # The call opens with its id and name and empty arguments; the arguments
            # follow in fragments under the same `index` (B1, B4.12).
            opening = {
                "index": 0,
                "id": new_call_id(),
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            delta = {"role": "assistant", "content": None, "tool_calls": [opening], "refusal": None}
            frames = [chunk(delta, None)]
            frames.extend(
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}, None)
                for part in call.fragments(chunk_tokens)
            )
        frames.append(chunk({}, finish_reason(completion)))
        if include_usage:
            # The usage chunk comes after the finish chunk, with no choices (B1).
            usage_chunk = {
                "id": chunk_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": request.model,
                "service_tier": "default",
                "system_fingerprint": "fp_rungwaysim",
                "choices": [],
                "usage": self._usage(request, completion),
            }
            frames.append(encode_event(usage_chunk))
        frames.append(DONE)
        return frames

    def stream_error_frame(
        self, request: GenerationRequest, fault: StreamErrorFault, sent: int
    ) -> bytes:
        """`data: {"error": {...}}` as OpenAI sends it inside a 200 stream."""
        error = {
            "message": fault.message or ERROR_DEFAULTS[500][2],
            "type": fault.error_type or "server_error",
            "param": None,
            "code": None,
        }
        return encode_event({"error": error})

    def keepalive_frame(self) -> bytes:
        """An SSE comment, as OpenAI-compatible servers send to keep a quiet stream open."""
        return b": keep-alive\n\n"


class OpenAIApi(WireApi[OpenAIDialect]):
    """Routes requests to the OpenAI endpoints of one simulated upstream.

    A subclass serving another OpenAI generation API names its own dialect and paths.
    """

    dialect_class: type[OpenAIDialect] = OpenAIDialect
    generation_paths = frozenset({"/v1/chat/completions"})

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
        dialect = self.dialect_class(scenario, clock)
        service = GenerationService(scenario, dialect, book, faults, tally, billing=billing)
        super().__init__(scenario, dialect, service)

    def route(self, request: RecordedRequest) -> Reply:
        """The model list and one model, else OpenAI's 404."""
        path, method = request.path, request.method
        if method == "GET" and path == "/v1/models":
            return self._list_models(request)
        if method == "GET" and path.startswith("/v1/models/"):
            return self._get_model(request, path.removeprefix("/v1/models/"))
        message = f"Invalid URL ({method} {path})"
        return error_reply(404, message)

    @staticmethod
    def _model_object(model_id: str) -> dict[str, Any]:
        return {"id": model_id, "object": "model", "created": MODEL_CREATED, "owned_by": "system"}

    def _list_models(self, request: RecordedRequest) -> Reply:
        refused = self._dialect.authenticate(request)
        if refused is not None:
            return refused
        data = [self._model_object(model.id) for model in self._scenario.models]
        body = orjson.dumps({"object": "list", "data": data})
        return Reply(200, body, ((b"x-request-id", new_request_id().encode()),))

    def _get_model(self, request: RecordedRequest, model_id: str) -> Reply:
        refused = self._dialect.authenticate(request)
        if refused is not None:
            return refused
        if self._scenario.model(model_id) is None:
            message = f"The model `{model_id}` does not exist or you do not have access to it."
            return error_reply(404, message, code="model_not_found")
        body = orjson.dumps(self._model_object(model_id))
        return Reply(200, body, ((b"x-request-id", new_request_id().encode()),))
