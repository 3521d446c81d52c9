"""The OpenAI Responses API as a simulated upstream serves it, public and Codex backend.

Routes: `POST /v1/responses` (the public API), `POST /backend-api/codex/responses` (the
ChatGPT plan's Codex backend, the same dialect), `GET /v1/models`, `GET /v1/models/{id}`.
Wire shapes follow docs/provider-signals.md B2: a `response` object with `output` items
and `usage`; streams of `event: <type>` frames whose data carries `type` and a
`sequence_number` counting from 0, with no `[DONE]`; the Codex client builds its turn
from the complete `response.output_item.done` items and needs a terminal
`response.completed` carrying the id and usage. An in-stream error is `response.failed`.

Errors, quota refusals and quota headers are OpenAI's (A3), or a ChatGPT plan's on a
Codex-family scenario (A4.3, A4.5). On the Codex path the backend's own refusals come
first, as `400 {"detail": ...}`: it only streams, never stores, needs `instructions`
and refuses `max_output_tokens` (A4.2).
"""

from __future__ import annotations

import secrets
from typing import Any

import orjson

from rungway.protocol.sse import encode_event
from rungway.sim.exchange import RecordedRequest, Reply
from rungway.sim.faults import StreamErrorFault
from rungway.sim.prompt_cache import openai_rules
from rungway.sim.wire.completion import Completion, estimate_input_tokens, responses_tool_turn
from rungway.sim.wire.openai_api import OpenAIApi, OpenAIDialect, new_call_id
from rungway.sim.wire.openai_errors import BAD_JSON_MESSAGE, error_reply, new_request_id
from rungway.sim.wire.prompt_prefix import responses_boundaries
from rungway.sim.wire.serving import GenerationRequest

PUBLIC_PATH = "/v1/responses"
CODEX_PATH = "/backend-api/codex/responses"
# The public API refuses smaller output caps.
MIN_OUTPUT_TOKENS = 16
STREAM_FAILED_MESSAGE = (
    "An error occurred while processing your request. You can retry your request, or "
    "contact us through our help center at help.openai.com if the error persists."
)


def _detail(message: str) -> Reply:
    # The Codex backend answers malformed requests in this bare shape, not OpenAI's.
    return Reply(400, orjson.dumps({"detail": message}))


def _codex_refusal(body: dict[str, Any]) -> Reply | None:
    """The Codex backend's refusal of a request it does not take (A4.2), if any."""
    if not isinstance(body.get("instructions"), str):
        return _detail("Instructions are required")
    if body.get("store") is not False:
        return _detail("Store must be set to false")
    if body.get("stream") is not True:
        return _detail("Stream must be set to true")
    if "max_output_tokens" in body:
        return _detail("Unsupported parameter: max_output_tokens")
    return None


def _prompt(body: dict[str, Any]) -> dict[str, Any]:
    return {key: body[key] for key in ("instructions", "input", "tools") if key in body}


def response_id(request: GenerationRequest) -> str:
    """The response's id, derived from the request id so every frame names the same one."""
    return "resp_" + request.request_id.removeprefix("req_")


def _usage(completion: Completion) -> dict[str, Any]:
    # `input_tokens` includes the tokens read from the prompt cache (B4).
    total = completion.input_tokens + completion.output_tokens
    return {
        "input_tokens": completion.input_tokens,
        "input_tokens_details": {
            "cached_tokens": completion.cache_read_tokens,
            "cache_write_tokens": 0,
        },
        "output_tokens": completion.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": total,
    }


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


class _Item:
    """The one output item of a reply: a message or a function call, with stable ids."""

    __slots__ = ("call_id", "completion", "id")

    def __init__(self, completion: Completion) -> None:
        self.completion = completion
        call = completion.tool_call is not None
        self.id = ("fc_" if call else "msg_") + secrets.token_hex(24)
        self.call_id = new_call_id()

    def render(self, *, done: bool) -> dict[str, Any]:
        """The item as `output_item.added` (not done) or `output_item.done` shows it."""
        completion = self.completion
        status = "in_progress"
        if done:
            status = "incomplete" if completion.truncated else "completed"
        call = completion.tool_call
        if call is None:
            content = [_text_part(completion.text)] if done else []
            return {
                "id": self.id,
                "type": "message",
                "status": status,
                "role": "assistant",
                "content": content,
            }
        return {
            "id": self.id,
            "type": "function_call",
            "status": status,
            "call_id": self.call_id,
            "name": call.name,
            "arguments": call.arguments if done else "",
        }


class ResponsesDialect(OpenAIDialect):
    """Parses Responses requests and renders `response` objects and their event streams.

    Errors and quota refusals are the Chat Completions dialect's: both are OpenAI's.
    """

    def parse_generation(self, request: RecordedRequest) -> GenerationRequest | Reply:
        """Validate a `POST /v1/responses` (or Codex backend) request."""
        refused = self.authenticate(request)
        if refused is not None:
            return refused
        body = request.body
        if not isinstance(body, dict):
            return error_reply(400, BAD_JSON_MESSAGE)
        codex = request.path == CODEX_PATH
        if codex and (refusal := _codex_refusal(body)) is not None:
            return refusal
        if "model" not in body:
            message = "Missing required parameter: 'model'."
            return error_reply(400, message, code="missing_required_parameter", param="model")
        model = self._models.get(body["model"])
        if model is None:
            if codex:
                return _detail(
                    f"The '{body['model']}' model is not supported when using Codex with a "
                    "ChatGPT account."
                )
            message = f"The requested model '{body['model']}' does not exist."
            return error_reply(400, message, code="model_not_found", param="model")
        max_tokens = body.get("max_output_tokens")
        if max_tokens is not None:
            valid = isinstance(max_tokens, int) and not isinstance(max_tokens, bool)
            if not valid or max_tokens < MIN_OUTPUT_TOKENS:
                message = (
                    "Invalid 'max_output_tokens': integer below minimum value. Expected a "
                    f"value >= {MIN_OUTPUT_TOKENS}, but got {max_tokens!r} instead."
                )
                return error_reply(
                    400, message, code="integer_below_min_value", param="max_output_tokens"
                )
        input_tokens = estimate_input_tokens(_prompt(body))
        if model.context_window is not None and input_tokens > model.context_window:
            message = (
                "Your input exceeds the context window of this model. Please adjust your "
                "input and try again."
            )
            return error_reply(400, message, code="context_length_exceeded", param="input")
        rules = openai_rules(body.get("prompt_cache_retention"))
        return GenerationRequest(
            model=model.id,
            stream=body.get("stream") is True,
            max_tokens=max_tokens,
            input_tokens=input_tokens,
            body=body,
            request_id=new_request_id(),
            tools=responses_tool_turn(body),
            cache_rules=rules,
            boundaries=responses_boundaries(body) if input_tokens >= rules.min_tokens else (),
        )

    def _response(
        self,
        request: GenerationRequest,
        status: str,
        output: list[dict[str, Any]],
        usage: dict[str, Any] | None,
        error: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        body = request.body
        incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
        return {
            "id": response_id(request),
            "object": "response",
            "created_at": int(self._clock.now()),
            "status": status,
            "background": False,
            "error": error,
            "incomplete_details": incomplete,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": request.model,
            "output": output,
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": body.get("reasoning"),
            "store": body.get("store", True),
            "temperature": body.get("temperature", 1.0),
            "text": body.get("text", {"format": {"type": "text"}}),
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools", []),
            "top_p": body.get("top_p", 1.0),
            "truncation": "disabled",
            "usage": usage,
            "user": None,
            "metadata": body.get("metadata", {}),
        }

    def message(self, request: GenerationRequest, completion: Completion) -> Reply:
        """A complete `response` object."""
        status = "incomplete" if completion.truncated else "completed"
        output = [_Item(completion).render(done=True)]
        body = self._response(request, status, output, _usage(completion))
        return Reply(200, orjson.dumps(body), self._head(request))

    def stream_frames(self, request: GenerationRequest, completion: Completion) -> list[bytes]:
        """created, in_progress, the item's events, then `response.completed` (B2).

        A reply cut by its output cap ends with `response.incomplete` instead.
        """
        frames: list[bytes] = []

        def event(kind: str, **fields: Any) -> None:
            data = {"type": kind, "sequence_number": len(frames), **fields}
            frames.append(encode_event(data, kind))

        opening = self._response(request, "in_progress", [], None)
        event("response.created", response=opening)
        event("response.in_progress", response=opening)
        item = _Item(completion)
        place = {"item_id": item.id, "output_index": 0}
        event("response.output_item.added", output_index=0, item=item.render(done=False))
        chunk_tokens = self._scenario.response.chunk_tokens
        call = completion.tool_call
        if call is None:
            text = completion.text
            at = {**place, "content_index": 0}
            event("response.content_part.added", **at, part=_text_part(""))
            for delta in completion.chunks(chunk_tokens):
                event("response.output_text.delta", **at, delta=delta, logprobs=[])
            event("response.output_text.done", **at, text=text, logprobs=[])
            event("response.content_part.done", **at, part=_text_part(text))
        else:
            for delta in call.fragments(chunk_tokens):
                event("response.function_call_arguments.delta", **place, delta=delta)
            event("response.function_call_arguments.done", **place, arguments=call.arguments)
        done = item.render(done=True)
        event("response.output_item.done", output_index=0, item=done)
        status = "incomplete" if completion.truncated else "completed"
        final = self._response(request, status, [done], _usage(completion))
        event(f"response.{status}", response=final)
        return frames

    def stream_error_frame(
        self, request: GenerationRequest, fault: StreamErrorFault, sent: int
    ) -> bytes:
        """`response.failed`, its `response.error` carrying the fault's code and message."""
        message = fault.message or (
            f"{STREAM_FAILED_MESSAGE} Please include the request ID {request.request_id} in "
            "your message."
        )
        error = {"code": fault.error_type or "server_error", "message": message}
        failed = self._response(request, "failed", [], None, error)
        data = {"type": "response.failed", "sequence_number": sent, "response": failed}
        return encode_event(data, "response.failed")


class ResponsesApi(OpenAIApi):
    """Routes requests to the Responses endpoints (and model listing) of one upstream."""

    dialect_class = ResponsesDialect
    generation_paths = frozenset({PUBLIC_PATH, CODEX_PATH})
