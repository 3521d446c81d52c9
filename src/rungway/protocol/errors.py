"""Each wire API's way of saying something went wrong: its error body and its in-stream
error event."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from rungway.protocol import anthropic_messages, gemini, openai_chat, openai_responses
from rungway.protocol.api import Api
from rungway.protocol.failures import FailureClass

ErrorBody = Callable[[int, str, str | None], bytes]
"""(status, message, code) -> the error body a client of the API expects."""
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
