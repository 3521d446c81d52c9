"""Each wire API's way of saying something went wrong: its error body and its in-stream
error event."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol

from rungway.protocol import anthropic_messages, gemini, openai_chat, openai_responses
from rungway.protocol.api import Api
from rungway.protocol.failures import FailureClass


class ErrorBody(Protocol):
    """The error body a client of one API expects."""

    def __call__(
        self,
        status: int,
        message: str,
        code: str | None = None,
        *,
        retry_after_s: float | None = None,
    ) -> bytes:
        """The body for `status`; `retry_after_s`, when set, is also in the `retry-after`
        header, and an API whose errors carry the wait in the body (Google's) puts it there."""
        ...


StreamErrorEvent = Callable[[str, FailureClass | None], bytes]
"""(message, failure class) -> the event that ends a stream of the API with an error."""

ERROR_BODIES: Final[dict[Api, ErrorBody]] = {
    Api.OPENAI_CHAT: openai_chat.error_body,
    Api.OPENAI_RESPONSES: openai_responses.error_body,
    Api.ANTHROPIC_MESSAGES: anthropic_messages.error_body,
    Api.GEMINI: gemini.error_body,
}
STREAM_ERROR_EVENTS: Final[dict[Api, StreamErrorEvent]] = {
    Api.OPENAI_CHAT: openai_chat.stream_error_event,
    Api.OPENAI_RESPONSES: openai_responses.stream_error_event,
    Api.ANTHROPIC_MESSAGES: anthropic_messages.stream_error_event,
    Api.GEMINI: gemini.stream_error_event,
}
