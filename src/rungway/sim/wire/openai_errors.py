"""OpenAI's error responses as the simulated upstreams send them.

Shapes and messages follow docs/provider-signals.md A3 and B1: `{"error":{"message",
"type","param","code"}}`, the two 429 flavours, the 401s for a missing or wrong key, and the
402 a Copilot seat answers a chat request past its allowance (A5.3).
"""

from __future__ import annotations

import secrets

import orjson

from rungway.sim.credential import Authenticate, credential_check
from rungway.sim.exchange import Header, Reply
from rungway.sim.scenario import AuthSpec

ERROR_DEFAULTS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Forbidden."),
    404: ("invalid_request_error", None, "Not found."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests."),
    500: (
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    502: ("server_error", None, "Bad gateway."),
    503: ("server_error", None, "The server is overloaded or not ready yet."),
}
INSUFFICIENT_QUOTA_MESSAGE = (
    "You exceeded your current quota, please check your plan and billing details. For more "
    "information on this error, read the docs: "
    "https://platform.openai.com/docs/guides/error-codes/api-errors."
)
MISSING_KEY_MESSAGE = (
    "You didn't provide an API key. You need to provide your API key in an Authorization "
    "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field "
    "(with blank username) if you're accessing the API from your browser and are prompted "
    "for a username. You can obtain an API key from https://platform.openai.com/account/api-keys."
)
BAD_JSON_MESSAGE = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
    "using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was "
    "sent was not valid JSON.)"
)


def new_request_id() -> str:
    """A request id in OpenAI's `req_…` form."""
    return "req_" + secrets.token_hex(16)


def error_reply(
    status: int,
    message: str,
    *,
    error_type: str = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
    request_id: str | None = None,
    headers: tuple[Header, ...] = (),
) -> Reply:
    """An OpenAI error response: `{"error":{"message","type","param","code"}}`."""
    body = orjson.dumps(
        {"error": {"message": message, "type": error_type, "param": param, "code": code}}
    )
    request_id = request_id or new_request_id()
    return Reply(status, body, ((b"x-request-id", request_id.encode()), *headers))


def wait_phrase(seconds: float) -> str:
    """How OpenAI's 429 messages say a wait: `644ms`, `6.2s`, `90s`."""
    if seconds < 1:
        return f"{max(1, round(seconds * 1000))}ms"
    return f"{seconds:.1f}".removesuffix(".0") + "s"


def mask_key(key: str) -> str:
    """A key as OpenAI echoes it in a 401: the ends kept, the middle starred."""
    if len(key) <= 12:
        return "*" * len(key)
    return f"{key[:8]}{'*' * (len(key) - 12)}{key[-4:]}"


def unauthorized(sent: str | None) -> Reply:
    """The 401 for a missing (`sent` is None) or wrong API key."""
    if not sent:
        return error_reply(401, MISSING_KEY_MESSAGE, code="invalid_api_key")
    message = (
        f"Incorrect API key provided: {mask_key(sent)}. You can find your API key at "
        "https://platform.openai.com/account/api-keys."
    )
    return error_reply(401, message, code="invalid_api_key")


def openai_authenticate(auth: AuthSpec) -> Authenticate:
    """The OpenAI API's credential check for the scenario's key."""
    return credential_check(auth, unauthorized)


def quota_exceeded() -> Reply:
    """The refusal of a premium request once the allowance is spent and overage is off.

    Public reports of Copilot clients (the editor extension's log, the command-line
    client, proxies) consistently show HTTP 402 with exactly this body on chat
    completions; no first-party documentation was found, so treat it as observed.
    """
    body = {"error": {"message": "You have no quota", "code": "quota_exceeded"}}
    return Reply(402, orjson.dumps(body))
