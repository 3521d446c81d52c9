"""Each wire API's way of saying something went wrong: its error body and its in-stream
error event."""

from __future__ import annotations

import math
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


LONGEST_CLIENT_WAIT_S: Final = 60.0
"""The longest `retry-after` a refusal leaves a client to sleep through on its own.

The official SDKs retry a 429 twice by default and sleep what `retry-after` says between
tries: anthropic 2.x for any wait, openai 3.x up to 120 s (`MAX_RETRY_AFTER_DELAY`), and
their earlier releases up to 60 s, past which they ignore the header and back off for under
8 s, so their retries come before the route can serve and fail again. A minute is the
longest wait every release honours, and about what an agent's user will sit through
without word; past it the refusal also says `x-should-retry: false`, which every release
obeys, so the client gets the message (with the moment to retry) at once."""


def refusal_headers(retry_after_s: float | None) -> list[tuple[str, str]]:
    """The headers that tell a client when to retry a refusal: `retry-after` in whole
    seconds (rounded up, never before the moment), `retry-after-ms` to the millisecond for
    the clients that read it, and `x-should-retry: false` past `LONGEST_CLIENT_WAIT_S`."""
    if retry_after_s is None:
        return []
    wait = max(0.001, retry_after_s)
    # Rounded up past a millisecond's float noise: a wait of 30.0000001 s is 30 s.
    headers = [
        ("retry-after", str(max(1, math.ceil(wait - 0.001)))),
        ("retry-after-ms", str(max(1, round(wait * 1000)))),
    ]
    if wait > LONGEST_CLIENT_WAIT_S:
        headers.append(("x-should-retry", "false"))
    return headers


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
